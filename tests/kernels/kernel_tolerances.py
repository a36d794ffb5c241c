"""Named tolerances for the kernel tests, with the reason for each.

Bytes of every quantised record, page layouts and state rows are compared exactly (no tolerance).
"""

# Compressor entries in fp32: the kernel sums the softmax in a different order than torch (online softmax
# over row tiles) and uses its own exp / rsqrt; values are O(1) (after RMSNorm O(weight)), so a few fp32
# ulps of difference are expected, 1e-5 leaves room for ~100 ulps.
COMPRESS_F32 = dict(rtol=1e-5, atol=1e-5)

# Compressor entries in bf16: the fp32 results above may round to neighbouring bf16 values, i.e. differ by
# one bf16 ulp (2**-7 relative, bf16 keeps 8 significant bits) plus the fp32 difference.
COMPRESS_BF16 = dict(rtol=2.0**-7, atol=1e-5)

# Reference chunked vs reference one-shot compressor: same maths, different summation grouping.
REF_VS_REF = dict(rtol=1e-6, atol=1e-6)
