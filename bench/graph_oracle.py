"""Oracle facts for bench_graph_recall's diagnostic (`--facts observations`): the graph a capable extractor would
give over LoCoMo's turns, to tell "the graph modes fail" from "the offline extractor's graph is too sparse".

Never a product default, never used for a shipped figure or the tuning of a shipped default.

What it writes: LoCoMo's dev file carries, per session, `observation`: facts about each speaker written by an
LLM, each with the dialogue ids of the turns it came from ("Caroline attended an LGBTQ support group recently",
D1:3). The offline parser finds no fact in these sentences (0 of 353 tried), so each observation becomes the
triples an OpenIE-style extractor would give it (HippoRAG's graph): the speaker -> `about` -> each noun phrase
of the sentence (spaCy's noun chunks, determiners and possessives dropped; pronouns and the speaker's own name
left out), the fact's sentence the observation itself. It is written through `Ingestor.attach` as what each of
its evidence turns said: the entities resolved as ingestion resolves them (alias, then embedding similarity) and
linked to the turn (the mention graph), the facts sourced from it, the names it says linked. On top of what the
parser extracted when the turns came in through POST /messages.

Caveat: the observations were written by an LLM that read the turns the questions' answers come from: an upper
bound for extraction, not a measurement of any extractor.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import normalise_evidence  # noqa: E402

RELATION = "about"  # no table row, not one value per subject: every topic of a speaker is held at once
_SKIP_POS = {"DET", "PRON", "PART"}


@dataclass(frozen=True)
class Observation:
    speaker: str
    sentence: str
    evidence: tuple[str, ...]


def observations(path: Path, sample: int, known: set[str]) -> list[Observation]:
    """The sample's observations whose evidence names a turn of the conversation."""
    raw = json.loads(path.read_text())[sample]["observation"]
    out = []
    for session in raw.values():
        for speaker, items in session.items():
            for sentence, *evidence in items:
                ids = normalise_evidence(evidence if not isinstance(evidence[0], list) else evidence[0], known)
                if ids:
                    out.append(Observation(speaker, sentence, tuple(ids)))
    return out


def topics(nlp: Any, sentence: str, speaker: str) -> list[str]:
    """The sentence's noun phrases without their determiners and possessives, each once; pronouns and the
    speaker's own name are not topics."""
    out: dict[str, None] = {}
    for chunk in nlp(sentence).noun_chunks:
        words = [t.text for t in chunk if t.pos_ not in _SKIP_POS and not t.text.lower().endswith("'s")]
        phrase = " ".join(words).strip(" ,.'")
        if phrase and phrase.lower() != speaker.lower() and any(c.isalpha() for c in phrase):
            out.setdefault(phrase, None)
    return list(out)


def oracle_extraction(nlp: Any, obs: Observation) -> Any:
    from mnemobus.engine.extract import ExtractedEntity, ExtractedFact, Extraction

    objects = topics(nlp, obs.sentence, obs.speaker)
    return Extraction(
        entities=(ExtractedEntity(obs.speaker, "person"), *(ExtractedEntity(o) for o in objects)),
        facts=tuple(ExtractedFact(obs.speaker, RELATION, o, "semantic", obs.sentence, confidence=1.0,
                                  subject_type="person") for o in objects),
        extractor="locomo-observations",
    )


async def write_observations(engine: Any, path: Path, sample: int, conv: dict) -> dict[str, int]:
    """Every observation of the conversation attached to each of its evidence turns; returns the counts."""
    from mnemobus.engine.extract_parse import load_pipeline
    from mnemobus.engine.ingest import Ingestor
    from mnemobus.engine.mentions import named_spans
    from mnemobus.store.model import episode_id_for

    nlp = load_pipeline()
    ingestor = Ingestor(engine.store, engine.extractor, engine.embedder)
    group = conv["group"]
    found = {dia for dia, _, _ in conv["turns"]}
    counts = {"observations": 0, "links": 0, "entities": 0, "facts": 0}
    obs_list = observations(path, sample, found)
    ids = {dia: episode_id_for(group, dia, "user") for o in obs_list for dia in o.evidence}
    stored = {e.source_message_id: e for e in await engine.store.get_episodes(group, list(ids.values()))}
    for obs in obs_list:
        extraction = oracle_extraction(nlp, obs)
        counts["observations"] += 1
        for dia in obs.evidence:
            episode = stored[dia]
            outcome = await ingestor.attach(episode, extraction, named_spans(obs.sentence))
            counts["links"] += 1
            counts["entities"] += outcome.entities
            counts["facts"] += outcome.facts_added
    return counts
