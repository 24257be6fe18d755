"""Engines: the interface (`base`), the HTTP adapters (vLLM, SGLang, llama.cpp, Ollama), `replay` and `demo`,
and `build_engine`, which reads an `--engine` spec (`spec`)."""
