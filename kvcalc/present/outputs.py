"""The commands with ``--json`` output, in the order docs/json-output.md describes them: one list, read by
``schema --output`` (its help and its refusal) and by :mod:`kvcalc.present.schemas`, kept apart so the command
line's help does not load the schemas."""

OUTPUTS = ("estimate", "compare", "capacity", "sweep", "show", "models", "gpus", "claims", "check-log", "verify",
           "import-hf", "import-gguf", "plot", "report", "schema", "decode", "transfer", "fit")
