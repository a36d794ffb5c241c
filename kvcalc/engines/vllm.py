"""vLLM's facts, pinned to one version and cited file by file."""

VERSION = "0.33.0"

#: vLLM (DeepSeek V4, fp8_ds_mla cache dtype) rounds every page up to a multiple of this.
V4_PAGE_ALIGNMENT = 576
