#!/usr/bin/env python
"""Regenerate the zoo: kvcalc/data/configs/<name>.yaml from the real config.json fixtures in tests/fixtures/hf (provenance
in tests/fixtures/hf/SOURCES.md) through `kvcalc import-hf`. A test checks the committed files equal this output.

    python scripts/make_zoo.py           # rewrite the zoo configs
    python scripts/make_zoo.py --check   # exit 1 when a committed file differs
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvcalc.config.hf import import_config, read_config, to_yaml  # noqa: E402

# fixture -> (config name, Hugging Face id); models with a hand-written config (deepseek-v3.2, deepseek-v4-*,
# llama-3.1-8b, qwen3-8b, gemma-3-27b) are not duplicated here: tests compare those with the fixtures instead
ZOO = {
    "llama-2-7b": ("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
    "mixtral-8x7b": ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),
    "qwen3-30b-a3b": ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
    "gpt-oss-20b": ("gpt-oss-20b", "openai/gpt-oss-20b"),
    "deepseek-v3": ("deepseek-v3", "deepseek-ai/DeepSeek-V3"),
    "kimi-k2": ("kimi-k2", "moonshotai/Kimi-K2-Instruct"),
    "glm-dsa": ("glm-5", "zai-org/GLM-5"),
    "qwen3-next-80b-a3b": ("qwen3-next-80b-a3b", "Qwen/Qwen3-Next-80B-A3B-Thinking"),
    "qwen3.5-9b": ("qwen3.5-9b", "Qwen/Qwen3.5-9B"),
    "phi-4": ("phi-4", "microsoft/phi-4"),
    "mistral-7b-v0.3": ("mistral-7b-v0.3", "mistralai/Mistral-7B-Instruct-v0.3"),
    "nemotron-h-56b-base-8k": ("nemotron-h-56b", "nvidia/Nemotron-H-56B-Base-8K"),
    # MiniMax's GitHub repository, not a Hub page: the 40k and 80k Hub models share this architecture
    "minimax-m1": ("minimax-m1", "https://github.com/MiniMax-AI/MiniMax-M1/blob/2abb4f45a9df4154b4bde024d51874bd127edcee/config.json"),
    "deepseek-v2-lite": ("deepseek-v2-lite", "deepseek-ai/DeepSeek-V2-Lite"),
    "gemma-2-9b-it": ("gemma-2-9b", "google/gemma-2-9b-it"),
    "qwen2.5-7b": ("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct"),
    "llama-4-scout": ("llama-4-scout", "meta-llama/Llama-4-Scout-17B-16E-Instruct"),  # aiconfigurator's trimmed copy
}


def render(fixture: str) -> tuple[Path, str]:
    name, hub = ZOO[fixture]
    rel = f"tests/fixtures/hf/{fixture}.json"
    data, _ = read_config(ROOT / rel)
    cfg = import_config(data, rel, name)
    url = hub if hub.startswith("https://") else f"https://huggingface.co/{hub}/blob/main/config.json"
    cfg["sources"]["hub"] = f"{url} (the fixture's provenance: tests/fixtures/hf/SOURCES.md)"
    return ROOT / "kvcalc" / "data" / "configs" / f"{name}.yaml", to_yaml(cfg)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    bad = 0
    for fixture in ZOO:
        path, text = render(fixture)
        if check:
            if not path.is_file() or path.read_text() != text:
                print(f"differs: {path.relative_to(ROOT)}")
                bad += 1
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
