#!/usr/bin/python3
"""Prints model.py's training_flops_per_token for model configs, without torch.

tests/trainer/flops_test.cc holds the C++ count (trainer/settings/flops.h)
to model.py's; CI has no torch, which model.py imports first. So this script
reads model.py's source with the ast module and executes only what the count
needs, exactly as written there: the module's constant assignments, the
ModelConfig dataclass, matmul_params and training_flops_per_token. Another
change of model.py's count changes what this prints; a rename or a new
dependency of those functions fails here.

Usage: flops_reference.py CONFIG_JSON...   one JSON object of ModelConfig
fields per argument; prints one integer per config, in order.
"""

import ast
import json
import pathlib
import sys
from typing import Any, Callable, Dict

MODEL_PY = pathlib.Path(__file__).resolve().parent / "model.py"
WANTED = ("ModelConfig", "matmul_params", "training_flops_per_token")


def load_count(path: pathlib.Path = MODEL_PY) -> Dict[str, Any]:
    """The namespace of model.py's constants, ModelConfig and the two FLOP functions."""
    tree = ast.parse(path.read_text(), filename=str(path))
    keep = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
            keep.append(node)  # VOCAB_SIZE, PLACEMENTS, ...
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in WANTED:
            keep.append(node)
    found = {n.name for n in keep if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    missing = [name for name in WANTED if name not in found]
    if missing:
        raise SystemExit(f"{path}: no {', '.join(missing)} (flops_reference.py executes them)")
    namespace: Dict[str, Any] = {}
    exec("import dataclasses\nimport math\n", namespace)  # what ModelConfig's source imports
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


def main(argv: list) -> int:
    namespace = load_count()
    model_config: Callable[..., Any] = namespace["ModelConfig"]
    count: Callable[[Any], int] = namespace["training_flops_per_token"]
    for text in argv[1:]:
        cfg = model_config(**json.loads(text))
        cfg.validate()
        print(int(count(cfg)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
