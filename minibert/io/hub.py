"""Where a model named on the command line lives: a directory, a sentence-transformers folder, or
a Hugging Face hub id.

    resolve_model_dir("runs/tiny")                    -> runs/tiny
    resolve_model_dir("path/to/all-MiniLM-L6-v2")     -> the folder of its Transformer module
    resolve_model_dir("google/bert_uncased_L-4_H-256_A-4")
        -> the hub cache's snapshot of it (HF_HUB_CACHE, else HF_HOME/hub, else
           ~/.cache/huggingface/hub), read without a network and without any library;
           if it is not cached and the optional `huggingface_hub` is installed, it is downloaded
           (only the files minibert reads: never a pickle). Nothing else ever downloads.

A sentence-transformers folder (modules.json) keeps its BERT in the path of its
`sentence_transformers.models.Transformer` module: "" (the top level, today's layout) or a
subfolder such as `0_Transformer/` (older saves). The pooling and normalising modules around it
are sentence-transformers' own and are not read.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from minibert.io.jsonfile import read_json

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")  # owner/name
# what minibert reads from a model repository (a download takes these and nothing else)
MODEL_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*.safetensors",
               "vocab.txt", "tokenizer_config.json", "tokenizer.json", "special_tokens_map.json", "modules.json",
               "*/config.json", "*/model.safetensors", "*/vocab.txt", "*/tokenizer_config.json")
TRANSFORMER_MODULE = "sentence_transformers.models.Transformer"


def resolve_model_dir(name: str | Path) -> Path:
    """A model directory, sentence-transformers folder or hub id -> the directory that holds the
    BERT's config.json (see the module docstring). A name that is none of these comes back as a
    path, for the reader to say what is missing."""
    path = Path(name)
    if path.exists():
        return transformer_folder(path)
    if HUB_ID.match(str(name)):
        return transformer_folder(hub_snapshot(str(name)) or download(str(name)))
    return path


def transformer_folder(path: Path) -> Path:
    """A sentence-transformers folder -> its Transformer module's folder; anything else as it is."""
    modules_file = path / "modules.json"
    if not path.is_dir() or (path / "config.json").is_file() or not modules_file.is_file():
        return path
    modules = read_json(modules_file)
    if not isinstance(modules, list):
        raise ValueError(f"{modules_file} must hold a list of modules, not {type(modules).__name__}")
    for module in modules:
        if isinstance(module, dict) and module.get("type") == TRANSFORMER_MODULE:
            sub = module.get("path", "")
            if not isinstance(sub, str) or Path(sub).is_absolute() or ".." in Path(sub).parts:
                raise ValueError(f"{modules_file}: the Transformer module's path {sub!r} must be a folder inside "
                                 f"{path}")
            if not (path / sub).is_dir():  # said before anything else looks for vocab.txt or config.json in it
                raise ValueError(f"{modules_file} puts the Transformer module in {sub!r}, but {path / sub} is not a "
                                 f"folder: the sentence-transformers folder is incomplete")
            return path / sub
    raise ValueError(f"{modules_file} has no {TRANSFORMER_MODULE} module: not a BERT sentence-transformers folder")


def hub_cache() -> Path:
    """The Hugging Face hub cache, where huggingface_hub and transformers keep downloads."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    base = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def hub_snapshot(repo_id: str, revision: str = "main") -> Path | None:
    """The cached snapshot of `repo_id` (models--owner--name/snapshots/<commit>, the commit that
    refs/<revision> names), or None when the cache does not hold it."""
    repo = hub_cache() / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / revision
    if ref.is_file():
        commit = ref.read_text(encoding="utf-8").strip()
        if not re.fullmatch(r"[0-9a-f]{7,64}", commit):
            raise ValueError(f"{ref} holds {commit[:80]!r}, not a commit hash")
    else:  # a cache filled without refs (copied by hand): its one snapshot, if it has exactly one
        found = sorted(p.name for p in (repo / "snapshots").iterdir()) if (repo / "snapshots").is_dir() else []
        if len(found) != 1:
            return None
        commit = found[0]
    snapshot = repo / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


def download(repo_id: str) -> Path:
    """Download `repo_id`'s model files with the optional huggingface_hub -> the snapshot folder."""
    how = (f"download config.json, model.safetensors, vocab.txt and tokenizer_config.json from "
           f"https://huggingface.co/{repo_id} into a folder and pass the folder")
    try:
        # lazy: huggingface_hub is optional (not in pyproject.toml's dependencies)
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ValueError(f"{repo_id}: no such folder here, and the Hugging Face cache ({hub_cache()}) does not hold "
                         f"it; to download it, `pip install huggingface_hub` (with a network), or {how}") from None
    print(f"downloading {repo_id} from the Hugging Face hub into {hub_cache()} (model files only) ...", flush=True)
    try:
        return Path(snapshot_download(repo_id, allow_patterns=list(MODEL_FILES)))
    except Exception as e:  # noqa: BLE001  the library's many network and repository errors: the message says
        # which; nothing was loaded, so a bug here cannot be mistaken for a model
        raise ValueError(f"{repo_id}: could not download it from the Hugging Face hub ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}); offline, {how}") from None
