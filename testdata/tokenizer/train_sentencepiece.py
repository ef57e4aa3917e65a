"""Train the three small SentencePiece models in this folder:
spm-unigram.model (unigram, NFKC, as T5's) and spm-bpe.model (BPE with byte
fallback and digits split, as Llama's and Gemma's) on corpus.txt, and
spm-runs.model (unigram, no normalization) on corpus-runs.txt, which this
script writes: URLs, digit runs and rules of `=` and `-`, so that the model
has pieces such as `w` and `ww`, `4` and `44`, `=` and `==`, and a run of one
character splits into pieces of equal total score two ways (`w` `ww` or
`ww` `w`), which only the scores' float sums up to the run decide.

Nothing is downloaded: the models are trained from scratch on the committed
text, with paths relative to this folder (a model keeps its trainer's
options, the input path among them), so a rerun anywhere writes the same
bytes. Also writes expected-spm.jsonl: for each line of corpus.txt and each
text of RUN_TEXTS below, the ids the Python `sentencepiece` package gives
with each model (bos and eos added), so the Rust tests check that infeed's
tokenization is the same.

Usage (needs `pip install sentencepiece==0.2.1`, e.g. in a venv):
    python testdata/tokenizer/train_sentencepiece.py
"""

import json
import os

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = {
    "num_threads": 1,
    "bos_id": 1,
    "eos_id": 2,
    "unk_id": 0,
    "pad_id": -1,
    "hard_vocab_limit": False,
    "minloglevel": 2,
}
MODELS = {
    "spm-unigram": {"input": "corpus.txt", "model_type": "unigram", "vocab_size": 300},
    "spm-bpe": {
        "input": "corpus.txt",
        "model_type": "bpe",
        # 256 byte pieces and the corpus's characters, then merges.
        "vocab_size": 600,
        "byte_fallback": True,
        "split_digits": True,
        "normalization_rule_name": "identity",
    },
    # No normalization: NFKC's table alone is 240 KB; this model is 3 KB.
    "spm-runs": {
        "input": "corpus-runs.txt",
        "model_type": "unigram",
        "vocab_size": 200,
        "normalization_rule_name": "identity",
    },
}
WORDS = ["the", "docs", "python", "module", "see", "index", "value", "section", "example", "note"]


def runs_corpus():
    """corpus-runs.txt's lines: fixed text, no random numbers."""
    lines = []
    for i in range(1, 41):
        w = WORDS[i % len(WORDS)]
        lines.append(f"See ('www.python.org', {4 * i}) and http://www.python.org/{w}/ for the {w}.")
        lines.append(f"{w.capitalize()} {i}")
        lines.append("=" * (3 + i % 37))
        lines.append(
            f"The value {'4' * (1 + i % 19)} is {'0' * (1 + i % 7)} and {w} {'-' * (2 + i % 23)}"
        )
    return lines


def run_texts():
    """Texts with runs of one character: alone, after short and long
    prefixes, and documents of several lines (a rule under each heading), so
    that the runs' ties fall both ways."""
    texts = [
        "('www.python.org'",
        "See ('www.python.org', 80) and http://www.python.org/docs/.",
        "w ww www wwww wwwww wwwwww wwwwwww wwwwwwww",
        "4444444444",
        "4 44 444 4444 44444 444444 4444444 44444444 444444444",
        "==========",
        "= == === ==== ===== ====== ======= ======== =========",
        "---------- ---------------------------------------- -",
        "0000000 and 00000000000000 and 0",
    ]
    for i in range(8):
        parts = []
        for j in range(i % 3 + 2):
            w = WORDS[(i + j) % len(WORDS)]
            parts.append(f"{w.capitalize()} {j}\n{'=' * (5 + (i * 7 + j) % 41)}\n")
            parts.append(
                f"The {w} at ('www.python.org' {'w' * (2 + (i + j) % 9)}"
                f" and {'4' * (2 + (i * 3 + j) % 29)}.\n"
            )
        texts.append("".join(parts))
    return texts


def main():
    os.chdir(HERE)
    with open("corpus-runs.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(runs_corpus()) + "\n")
    with open("corpus.txt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    rows = [{"text": text} for text in lines + run_texts()]
    for name, options in MODELS.items():
        spm.SentencePieceTrainer.train(model_prefix=name, **COMMON, **options)
        os.remove(name + ".vocab")
        sp = spm.SentencePieceProcessor(model_file=name + ".model")
        for row in rows:
            row[name] = sp.encode(row["text"], add_bos=True, add_eos=True)
    with open("expected-spm.jsonl", "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
