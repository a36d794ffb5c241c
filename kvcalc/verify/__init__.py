"""`kvcalc verify`: allocate the planned caches on a GPU, fill them with the Triton kernels in
``kvcalc_kernels`` and compare measured memory with the prediction.

Not built yet (a later issue). This is the only part of kvcalc that may import torch or triton, and it
must do so lazily, inside functions, so that ``kvcalc estimate`` never pays for them.
"""
