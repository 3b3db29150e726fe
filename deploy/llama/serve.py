"""llama-cpp-python's OpenAI-compatible server with one change: embeddings are mean-pooled.

Run with the llama venv's python and the server's own flags
(`python deploy/llama/serve.py --model M.gguf --embedding true ...`). Why: for decoder
models like SmolLM2 llama.cpp's pooling is "none", so `/v1/embeddings` answers one
vector per token, which no OpenAI client can use, and the server has no flag to set
the pooling. With mean pooling the same server answers chat and embeddings.
"""

import llama_cpp

_init = llama_cpp.Llama.__init__


def _pooled_init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
    if kwargs.get("embedding"):
        kwargs.setdefault("pooling_type", llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    _init(self, *args, **kwargs)


llama_cpp.Llama.__init__ = _pooled_init

if __name__ == "__main__":
    from llama_cpp.server.__main__ import main

    main()
