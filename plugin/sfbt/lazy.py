"""Names a package exports from its modules, each imported when first
asked for (so that a walk, which reads sections, imports neither the
dumper nor the writer nor the synthesis cache)."""

import sys


def lazy_exports(package, module_of):
    """The module-level ``__getattr__`` of ``package`` that imports each
    name of ``module_of`` ({name: module under package}) on first use and
    keeps it in the package's namespace."""
    def __getattr__(name):
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib's import_module: the importlib package
        # (and warnings with it) is not on the crash handler's imports
        module = __import__(f"{package}.{module_of[name]}", fromlist=("_",))
        value = getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value
    return __getattr__
