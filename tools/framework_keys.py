#!/usr/bin/env python3
"""Regenerates tests/data/framework_keys/*.txt: every key each training framework accepts, read
statically (Python's ast, no import of the framework) from the framework's own source at a
release tag. framework_bridge_test checks every key `monarch-sim export` writes, and every key
`monarch-sim import` maps, against these lists.

Usage: tools/framework_keys.py TORCHTITAN_GIT MEGATRON_LM_GIT DEEPSPEED_GIT MEGATRON_DEEPSPEED_GIT
                               MEGATRON_BRIDGE_GIT OUT_DIR
Each *_GIT is a git directory (a clone or a bare mirror); the tags read are below.
"""
import ast
import subprocess
import sys

TORCHTITAN_TAG = "v0.2.2"
MEGATRON_TAG = "core_v0.19.0"
DEEPSPEED_TAG = "v0.19.0"
MEGATRON_DEEPSPEED_REV = "HEAD"  # Megatron-DeepSpeed has no release tags
BRIDGE_TAG = "v0.6.0"


def show(git_dir, rev, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def sources(git_dir, rev, prefix):
    """The text of every .py file under prefix at rev (one git cat-file process for all)."""
    out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", rev, prefix],
                         check=True, capture_output=True, text=True).stdout
    paths = [p for p in out.split("\n") if p.endswith(".py")]
    batch = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(f"{rev}:{p}\n" for p in paths).encode()).stdout
    texts, pos = [], 0
    for _ in paths:
        header_end = batch.index(b"\n", pos)
        size = int(batch[pos:header_end].split()[2])
        texts.append(batch[header_end + 1:header_end + 1 + size].decode("utf-8", "replace"))
        pos = header_end + 1 + size + 1
    return texts


def ann_name(node):
    """The class name of an annotation: Foo, Optional[Foo], Foo | None -> 'Foo'."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return ann_name(node.slice)
    if isinstance(node, ast.BinOp):
        return ann_name(node.left) or ann_name(node.right)
    if isinstance(node, ast.Tuple):
        for e in node.elts:
            n = ann_name(e)
            if n and n != "None":
                return n
    return None


class Classes:
    """Class name -> its definitions [(bases, [(field, annotation node, default node)])] over
    many files. Bases imported under another name ("TransformerConfig as MCoreTransformerConfig")
    are recorded under the original name. Classes of one name in several files are merged."""

    def __init__(self):
        self.by_name = {}

    def add_source(self, text):
        tree = ast.parse(text)
        aliases = {a.asname: a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   for a in node.names if a.asname}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = [(s.target.id, s.annotation, s.value) for s in node.body
                          if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
                bases = [aliases.get(ann_name(b), ann_name(b)) for b in node.bases]
                self.by_name.setdefault(node.name, []).append((bases, fields))

    def fields(self, name, seen=None):
        """Fields of the class and its bases (bases first), without private ones, each once."""
        seen = set() if seen is None else seen
        if name not in self.by_name or name in seen:
            return []
        seen.add(name)
        out = []
        for bases, own in self.by_name[name]:
            for b in bases:
                out += self.fields(b, seen)
            out += own
        names, unique = set(), []
        for f in out:
            if not f[0].startswith("_") and f[0] not in names:
                names.add(f[0])
                unique.append(f)
        return unique


def add_all(classes, texts):
    for text in texts:
        try:
            classes.add_source(text)
        except SyntaxError:
            pass


def torchtitan_keys(git_dir):
    classes = Classes()
    classes.add_source(show(git_dir, TORCHTITAN_TAG, "torchtitan/config/job_config.py"))
    keys = []

    def walk(cls, prefix):
        for name, annotation, _ in classes.fields(cls):
            sub = ann_name(annotation)
            if sub in classes.by_name and classes.fields(sub):
                walk(sub, prefix + name + ".")
            else:
                keys.append(prefix + name)

    walk("JobConfig", "")
    return keys


def literal_strings(node):
    return [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def flags_of(text):
    """Every "--flag" string given to add_argument in the file."""
    flags = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags += [s for s in literal_strings(node) if s.startswith("--")]
    return flags


def factory_flags(text, classes):
    """Flags that megatron/training/argument_utils.py's ArgumentGroupFactory derives from a
    dataclass: --field-name, or --no-field-name and --disable-field-name for a bool whose default
    is True; argparse_meta arg_names replace them."""
    flags = []
    tree = ast.parse(text)
    # exclude=NAME: the list assigned to NAME in the same function.
    lists = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            lists[(fn.name, t.id)] = node.value
    calls = [(fn.name, node) for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) for node in ast.walk(fn)]
    for fn_name, node in calls:
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ArgumentGroupFactory"):
            continue
        cls = ann_name(node.args[0])
        exclude = set()
        for kw in node.keywords:
            value = kw.value
            if kw.arg == "exclude" and isinstance(value, ast.Name):
                value = lists.get((fn_name, value.id), value)
            if kw.arg == "exclude" and isinstance(value, ast.List):
                exclude = {e.value for e in value.elts if isinstance(e, ast.Constant)}
        for name, annotation, default in classes.fields(cls):
            if name in exclude:
                continue
            meta_names = None
            if isinstance(default, ast.Call):
                for kw in default.keywords:
                    if kw.arg == "metadata":
                        for m in ast.walk(kw.value):
                            if isinstance(m, ast.Dict):
                                for k, v in zip(m.keys, m.values):
                                    if isinstance(k, ast.Constant) and k.value == "arg_names" and isinstance(v, ast.List):
                                        meta_names = [e.value for e in v.elts if isinstance(e, ast.Constant)]
            if meta_names:
                flags += meta_names
                continue
            dashed = name.replace("_", "-")
            value = default
            if isinstance(default, ast.Call):
                value = next((kw.value for kw in default.keywords if kw.arg == "default"), None)
            is_bool = isinstance(annotation, ast.Name) and annotation.id == "bool"
            if is_bool and isinstance(value, ast.Constant) and value.value is True:
                flags += ["--no-" + dashed, "--disable-" + dashed]
            else:
                flags.append("--" + dashed)
    return flags


def megatron_keys(git_dir):
    classes = Classes()
    add_all(classes, sources(git_dir, MEGATRON_TAG, "megatron"))
    args = show(git_dir, MEGATRON_TAG, "megatron/training/arguments.py")
    return flags_of(args) + factory_flags(args, classes)


def megatron_deepspeed_keys(megatron_ds_dir, deepspeed_dir):
    flags = flags_of(show(megatron_ds_dir, MEGATRON_DEEPSPEED_REV, "megatron/arguments.py"))
    # deepspeed.add_config_arguments adds --deepspeed and --deepspeed_config.
    flags += flags_of(show(deepspeed_dir, DEEPSPEED_TAG, "deepspeed/__init__.py"))
    return flags


def module_strings(text):
    """Values of module-level NAME = "string" constants, except the *_DEFAULT ones."""
    out = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if names and not any(n.endswith("_DEFAULT") for n in names):
                out.append(node.value.value)
    return out


def pydantic_fields(classes, cls, prefix):
    """Fields of a DeepSpeedConfigModel, under their names and their aliases."""
    keys = []
    for name, _, default in classes.fields(cls):
        keys.append(prefix + name)
        if isinstance(default, ast.Call):
            for kw in default.keywords:
                if kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                    keys.append(prefix + kw.value.value)
    return keys


def deepspeed_keys(git_dir):
    top = module_strings(show(git_dir, DEEPSPEED_TAG, "deepspeed/runtime/constants.py"))
    classes = Classes()
    classes.add_source(show(git_dir, DEEPSPEED_TAG, "deepspeed/runtime/zero/config.py"))
    classes.add_source(show(git_dir, DEEPSPEED_TAG, "deepspeed/runtime/precision_config.py"))
    classes.add_source(show(git_dir, DEEPSPEED_TAG, "deepspeed/runtime/config_utils.py"))
    keys = top + ["zero_optimization", "bf16", "fp16", "activation_checkpointing"]
    keys += pydantic_fields(classes, "DeepSpeedZeroConfig", "zero_optimization.")
    keys += pydantic_fields(classes, "DeepSpeedBF16Config", "bf16.")
    keys += pydantic_fields(classes, "DeepSpeedFP16Config", "fp16.")
    act = show(git_dir, DEEPSPEED_TAG, "deepspeed/runtime/activation_checkpointing/config.py")
    keys += ["activation_checkpointing." + k for k in module_strings(act) if k != "activation_checkpointing"]
    return keys


def bridge_keys(bridge_dir, megatron_dir):
    """run_recipe.py overrides: ConfigContainer section.field for the sections the export writes
    (model: GPTModelProvider over Megatron-Core's TransformerConfig; train; ddp; comm_overlap;
    dataset), plus mixed_precision (a registered recipe name)."""
    classes = Classes()
    add_all(classes, sources(bridge_dir, BRIDGE_TAG, "src/megatron/bridge"))
    add_all(classes, sources(megatron_dir, MEGATRON_TAG, "megatron"))
    keys = ["mixed_precision"]
    for section, cls in [("model", "GPTModelProvider"), ("train", "TrainingConfig"),
                         ("ddp", "DistributedDataParallelConfig"), ("comm_overlap", "CommOverlapConfig"),
                         ("dataset", "GPTDatasetConfig")]:
        keys += [f"{section}.{name}" for name, _, _ in classes.fields(cls)]
    return keys


def write(path, source, keys):
    with open(path, "w") as f:
        f.write(f"# {source}\n# Generated by tools/framework_keys.py; one key per line.\n")
        for k in sorted(set(keys)):
            f.write(k + "\n")


def main():
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    tt, mlm, ds, mds, bridge, out = sys.argv[1:]
    write(f"{out}/torchtitan.txt", f"pytorch/torchtitan {TORCHTITAN_TAG} torchtitan/config/job_config.py (section.key)",
          torchtitan_keys(tt))
    write(f"{out}/megatron.txt", f"NVIDIA/Megatron-LM {MEGATRON_TAG} megatron/training/arguments.py (flags)",
          megatron_keys(mlm))
    write(f"{out}/megatron_deepspeed.txt",
          f"deepspeedai/Megatron-DeepSpeed megatron/arguments.py + DeepSpeed {DEEPSPEED_TAG} deepspeed/__init__.py (flags)",
          megatron_deepspeed_keys(mds, ds))
    write(f"{out}/deepspeed.txt",
          f"deepspeedai/DeepSpeed {DEEPSPEED_TAG} deepspeed/runtime/constants.py, zero/config.py, precision_config.py, "
          "activation_checkpointing/config.py (JSON keys, dotted)", deepspeed_keys(ds))
    write(f"{out}/megatron_bridge.txt",
          f"NVIDIA-NeMo/Megatron-Bridge {BRIDGE_TAG} src/megatron/bridge/training/config.py ConfigContainer + "
          f"Megatron-LM {MEGATRON_TAG} TransformerConfig / DistributedDataParallelConfig (overrides)", bridge_keys(bridge, mlm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
