"""Print the toolchain this process would build with (``Toolchain.detect``), as one JSON line.

Trusted code runs it with the builds' environment, forked from the evaluator's zygote (torch is
imported there already) or as a fresh interpreter: the evaluating process never imports torch.
"""

from __future__ import annotations

import dataclasses
import json

from .request import Toolchain


def main() -> None:
    print(json.dumps(dataclasses.asdict(Toolchain.detect())), flush=True)


if __name__ == "__main__":
    main()
