"""The package as shipped: its version, its types, its step names."""

from __future__ import annotations

import ast
import inspect
import pathlib
import re
from typing import Any

import pytest
from conftest import LM, LM_SPEC

import infeed
from infeed import _infeed

PYTHON = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = pathlib.Path(infeed.__file__).resolve().parent


def test_version_is_cargo_tomls():
    # python/Cargo.toml is the one place the version is written: pyproject.toml
    # takes it from there (dynamic), the extension compiles it in.
    cargo = (PYTHON / "Cargo.toml").read_text()
    package = cargo.split("[package]", 1)[1].split("\n[", 1)[0]
    (version,) = re.findall(r'^version\s*=\s*"([^"]+)"', package, re.MULTILINE)
    assert infeed.__version__ == version
    assert 'dynamic = ["version"]' in (PYTHON / "pyproject.toml").read_text()


def _stub_names() -> dict[str, set[str]]:
    """The stub's names: module level under "", each class's under its name."""
    tree = ast.parse((PACKAGE / "_infeed.pyi").read_text())
    names: dict[str, set[str]] = {"": set()}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names[""].add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[""].add(node.target.id)
        elif isinstance(node, ast.ClassDef):
            names[""].add(node.name)
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    public = {k: {n for n in v if not n.startswith("_")} for k, v in names.items()}
    public[""] |= names[""] & {"__version__"}
    return public


def _public(obj: Any) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stub_describes_the_extension():
    # py.typed marks the package typed; _infeed.pyi gives the extension's
    # types, name for name (a method added in python/src/*.rs needs its stub).
    assert (PACKAGE / "py.typed").is_file()
    stub = _stub_names()
    assert stub[""] == _public(_infeed) | {"__version__"}
    for cls in (_infeed.Batches, _infeed.Buffer):
        assert stub[cls.__name__] == _public(cls), cls.__name__


def _dummy(annotation: str) -> Any:
    """An argument of this annotation: right in type, not always in value
    (the extension may refuse the value, never the step's name)."""
    return {
        "int": 3,
        "int | None": 3,
        "bool": True,
        "str": "input_ids",
        "str | os.PathLike[str]": "idx",
        "Any": "int32",
        "Sequence[int]": [2],
        "float | Sequence[float]": 1.0,
        "Spec": LM_SPEC,
        "Iterable[tuple[int, int]]": [(2, 3)],
        "Iterable[int]": [0],
    }[annotation]


def _step_methods() -> list[str]:
    """The builder's step methods: those returning a Pipeline, but the sources
    and map_batch (a Python function, not a step of the engine)."""
    return [
        name
        for name, fn in inspect.getmembers(infeed.Pipeline, inspect.isfunction)
        if not name.startswith("_")
        and inspect.signature(fn).return_annotation == "Pipeline"
        and name != "map_batch"
    ]


def test_every_step_method_changes_the_description_and_runs():
    # Each builder method is one change to the engine's description, which
    # the engine reads (no per-method code in the extension).
    base = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).max_length(8).batch(2)
    assert base.shapes()
    methods = _step_methods()
    assert len(methods) >= 25, methods
    for name in methods:
        method = getattr(base, name)
        params = inspect.signature(method).parameters.values()
        args = [_dummy(p.annotation) for p in params if p.default is inspect.Parameter.empty]
        if name == "parse":
            # Its spec may be left out only for a TFDS pipeline (from_tfds).
            args = [LM_SPEC]
        try:
            stepped = method(*args)
            # (Options called with their defaults describe what the base does;
            # worker_reads is accepted and changes nothing.)
            same = name in ("parse", "read_options", "source_options", "worker_reads")
            assert stepped.describe() != base.describe() or same, name
            if name == "worker_reads":
                assert stepped.describe() == base.describe()
            stepped.shapes()
        except infeed.SpecError as e:
            # A dummy value may be refused, never the step.
            assert "unknown variant" not in str(e), name


def test_unknown_step_is_refused():
    described = infeed.Pipeline.from_files([LM]).parse(LM_SPEC).describe()
    described["batches"] = [{"no_such_step": {}}]
    with pytest.raises(infeed.SpecError, match=r"batches\[0\]: unknown variant `no_such_step`"):
        infeed.Pipeline.from_description(described)
