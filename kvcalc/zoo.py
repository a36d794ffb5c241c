"""Model lists that several places use (the headline table, the reports, the GPU check): one source each."""

#: The article's story in one table: the V3.2-style stack, the report's GQA8 baseline at V4-Pro's and
#: V4-Flash's depth, and the two V4 models. Ratios are against the reference at the same precision.
HEADLINE_MODELS = ("deepseek-v3.2", "gqa8-hd128-l61", "deepseek-v4-pro", "gqa8-hd128-l43", "deepseek-v4-flash")
HEADLINE_REFERENCE = "deepseek-v3.2"
#: The technical report's "~2% of a bf16 GQA8 baseline": each V4 model at fp8 against the baseline of its depth.
HEADLINE_BASELINES = (("deepseek-v4-pro", "fp8", "gqa8-hd128-l61", "bf16"),
                      ("deepseek-v4-flash", "fp8", "gqa8-hd128-l43", "bf16"))
