#!/usr/bin/env python3
"""Regenerates reactor_worker/reactor_pb2.py(i) from schemas/reactor.proto.

The generated code is committed, so that installing the package needs
neither protoc nor grpcio-tools. It is generated with grpcio-tools 1.68.1
(protoc for protobuf 5.28.1): the protobuf runtime loads code generated for
its own version or an older one, so this old baseline runs next to whatever
protobuf 5.28 to 7.x a service already uses.

    pip install --target /tmp/gt grpcio-tools==1.68.1
    PYTHONPATH=/tmp/gt python3 workers/python/generate.py          # rewrite
    PYTHONPATH=/tmp/gt python3 workers/python/generate.py --check  # CI: fail on drift
"""

import argparse
import filecmp
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SCHEMAS = HERE.parent.parent / "schemas"
PACKAGE = HERE / "reactor_worker"
OUTPUTS = ["reactor_pb2.py", "reactor_pb2.pyi"]
GRPCIO_TOOLS = "1.68.1"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    from importlib.metadata import version

    from grpc_tools import protoc

    if version("grpcio-tools") != GRPCIO_TOOLS:
        sys.exit(f"generate.py: grpcio-tools {GRPCIO_TOOLS} expected, found {version('grpcio-tools')}")
    with tempfile.TemporaryDirectory() as out:
        # grpc_tools bundles the well-known types' .proto files.
        import grpc_tools

        well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
        rc = protoc.main(
            [
                "protoc",
                f"-I{SCHEMAS}",
                f"-I{well_known}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                str(SCHEMAS / "reactor.proto"),
            ]
        )
        if rc != 0:
            sys.exit(f"generate.py: protoc failed ({rc})")
        for name in OUTPUTS:
            generated = pathlib.Path(out) / name
            committed = PACKAGE / name
            if args.check:
                if not committed.exists() or not filecmp.cmp(generated, committed, shallow=False):
                    sys.exit(f"generate.py: {committed} is not what schemas/reactor.proto generates; run generate.py")
            else:
                committed.write_bytes(generated.read_bytes())
    print("generate.py:", "up to date" if args.check else "written", ", ".join(OUTPUTS))


if __name__ == "__main__":
    main()
