"""No import under plugin/sfbt runs up a layer (docs/architecture.md).

Each module's imports, read with ast (function-level imports included:
importing on first use does not make an upward import right), must name
modules of its own layer or one below."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "plugin" / "sfbt"

#: bottom first; a module is placed by its first name under sfbt
LAYERS = (
    {"__init__", "errors", "printable", "progress", "usage", "arch", "cache", "files",
     "lazy", "lines", "names", "values", "frame_name"},
    {"elf"},
    {"sframe", "debuginfo"},
    {"dwarf"},
    {"symbols"},
    {"archive"},
    {"unwind"},
    {"commands"},
    {"live", "outputs"},
    {"crashes"},
    {"cli", "__main__"},
)


def layer_of(parts):
    for number, names in enumerate(LAYERS):
        if parts[0] in names:
            return number
    raise AssertionError(f"sfbt.{'.'.join(parts)} is in no layer of {__file__}")


def module_parts(path):
    """['sframe', 'model'] for plugin/sfbt/sframe/model.py."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts


def imported(path):
    """(line, [names under sfbt]) of every import of an sfbt module."""
    here = module_parts(path)
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "sfbt":
                base = []
                target = node.module.split(".")[1:]
            else:
                continue
            if not node.module:  # "from . import x": x is a module or a name of base
                for alias in node.names:
                    named = base + [alias.name] if node.level else [alias.name]
                    is_module = (PACKAGE.joinpath(*named).is_dir()
                                 or PACKAGE.joinpath(*named).with_suffix(".py").is_file())
                    yield node.lineno, named if is_module else (base or ["__init__"])
            else:
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names = alias.name.split(".")
                if names[0] == "sfbt" and len(names) > 1:
                    yield node.lineno, names[1:]


def test_every_module_has_a_layer():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50
    for path in modules:
        layer_of(module_parts(path))


def test_no_import_runs_up_a_layer():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = module_parts(path)
        for line, target in imported(path):
            if layer_of(target) > layer_of(here):
                upward.append(f"{path.relative_to(PACKAGE)}:{line} imports sfbt.{'.'.join(target)}")
    assert upward == [], "\n".join(upward)


def test_the_check_sees_an_upward_import(tmp_path):
    """The reader of imports finds relative, absolute and function-level
    imports (else the test above would pass by seeing nothing)."""
    global PACKAGE
    saved = PACKAGE
    try:
        PACKAGE = tmp_path
        (tmp_path / "sframe").mkdir()
        module = tmp_path / "sframe" / "model.py"
        module.write_text("from ..arch import Arch\n"
                          "def f():\n    from ..unwind.walk import Unwinder\n"
                          "import sfbt.cli\n")
        assert [t for _, t in sorted(imported(module))] == [
            ["arch"], ["unwind", "walk"], ["cli"]]
    finally:
        PACKAGE = saved
