"""Reading the objects of input files, as `kubectl apply -f` takes them: the generic half of
every offline input (simulate, validate, `--profile`, `--config`, and the subcommands that
read snapshots). One room per job:

- `paths`: which files an input names (FILE, DIR, `-`), and their bytes (size and binary checks);
- `reader`: their objects (JSON, multi-document YAML, Lists unpacked), problems as lines;
- the two YAML engines: `fast_yaml` (yaml_rs, taken only where it reads exactly as libyaml)
  and `libyaml` (PyYAML's C parser with our constructor; every other input, every error);
- `progress`: progress lines on stderr for long inputs;
- `wording`: how every input problem is worded, in every subcommand.

The garbage-collector policy for large inputs is `kopfsched.gcpolicy`'s.
"""

from kopfsched.documents.paths import MAX_INPUT_BYTES, STDIN, STDIN_NAME, SUFFIXES
from kopfsched.documents.progress import Progress
from kopfsched.documents.reader import Document, read_documents
from kopfsched.documents.wording import UNNAMED_KINDS, describe_type, object_label, problem_line

__all__ = [
    "MAX_INPUT_BYTES",
    "STDIN",
    "STDIN_NAME",
    "SUFFIXES",
    "UNNAMED_KINDS",
    "Document",
    "Progress",
    "describe_type",
    "object_label",
    "problem_line",
    "read_documents",
]
