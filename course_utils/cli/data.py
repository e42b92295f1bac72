"""Fetch or locate CIFAR-10 and build the course's cache.

python -m course_utils.cli.data                 # find a copy (see training/data.py) and cache it
python -m course_utils.cli.data --download      # download the original with torchvision
"""

from __future__ import annotations

import argparse
import sys

from ..training.data import load_cifar10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.cli.data",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument(
        "--root",
        default=None,
        help="a copy to use (see the module docstring)",
    )
    parser.add_argument(
        "--download",
        action="store_true",
        help="download the original with torchvision",
    )
    args = parser.parse_args(argv)
    data = load_cifar10(args.root, download=args.download)
    print(
        f"{data.source}: {len(data.train_images)} train, {len(data.test_images)} test images"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
