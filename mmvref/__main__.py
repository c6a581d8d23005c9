"""``python -m mmvref --info``: print the configuration a bug report needs."""
from __future__ import annotations

import argparse
import json


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mmvref", description=__doc__)
    ap.add_argument("--info", action="store_true", help="print versions, CPU, compile target, kernel paths, "
                                                        "threading and cache directory (the default action)")
    ap.add_argument("--json", action="store_true", help="the same as JSON")
    args = ap.parse_args(argv)
    from ._config import config_info, format_config

    info = config_info()
    print(json.dumps(info, indent=2) if args.json else format_config(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
