"""The embedder a config names. Apart from embed.py, whose models the static embedder is distilled from."""

from __future__ import annotations

from pathlib import Path

from mnemobus.engine.embed import CachedEmbedder, Embedder, HashEmbedder, LocalOnnxEmbedder
from mnemobus.engine.embed_static import StaticEmbedder
from mnemobus.shared.errors import ConfigError


#: the provider of the transformer itself: its batch costs ~30% more embedded per chunk, so `parse_child: auto`
#: leaves a batch whole beside it (kernel/backends.py)
LOCAL_EMBEDDER = "local"


def make_embedder(provider: str, model: str, cache_dir: Path | str = "data/embeddings") -> Embedder:
    """The embedder named in config; the local model fails here, at start-up, if its packages are absent."""
    if provider == "hash":
        return HashEmbedder()
    if provider == LOCAL_EMBEDDER:
        return CachedEmbedder(LocalOnnxEmbedder(model))
    if provider == "static":
        return StaticEmbedder(model, cache_dir)
    raise ConfigError(f"memory.embedding.provider: unknown provider {provider!r}")


EmbedderSpec = tuple[str, str, str]  # (provider, model, cache directory): make_embedder's arguments


def portable_spec(embedder: Embedder | None) -> EmbedderSpec | None:
    """How another process builds an embedder giving the very same vectors, or None when it cannot cheaply (the
    transformer: a second copy of the model would hold ~200 MB and minutes of CPU to load on 2 cores; a static
    table not built yet: the other process would build it, minutes at a low priority)."""
    if type(embedder) is HashEmbedder and embedder.dim == HashEmbedder().dim:
        return ("hash", "", "")
    if type(embedder) is StaticEmbedder and embedder.table_path.exists():
        return ("static", embedder.model, str(embedder.cache_dir))
    return None
