"""Train the two small SentencePiece models in this folder on corpus.txt:
spm-unigram.model (unigram, NFKC, as T5's) and spm-bpe.model (BPE with byte
fallback and digits split, as Llama's and Gemma's).

Nothing is downloaded: the models are trained from scratch on the committed
text, with paths relative to this folder (a model keeps its trainer's
options, the input path among them), so a rerun anywhere writes the same
bytes. Also writes expected-spm.jsonl: for each line of corpus.txt, the ids
the Python `sentencepiece` package gives with each model (bos and eos
added), so the Rust tests check that infeed's tokenization is the same.

Usage (needs `pip install sentencepiece==0.2.1`, e.g. in a venv):
    python testdata/tokenizer/train_sentencepiece.py
"""

import json
import os

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {
    "spm-unigram": {"model_type": "unigram", "vocab_size": 300},
    "spm-bpe": {
        "model_type": "bpe",
        # 256 byte pieces and the corpus's characters, then merges.
        "vocab_size": 600,
        "byte_fallback": True,
        "split_digits": True,
        "normalization_rule_name": "identity",
    },
}


def main():
    os.chdir(HERE)
    corpus = "corpus.txt"
    with open(corpus, encoding="utf-8") as f:
        lines = f.read().splitlines()
    rows = [{"text": line} for line in lines]
    for name, options in MODELS.items():
        spm.SentencePieceTrainer.train(
            input=corpus,
            model_prefix=name,
            num_threads=1,
            bos_id=1,
            eos_id=2,
            unk_id=0,
            pad_id=-1,
            hard_vocab_limit=False,
            minloglevel=2,
            **options,
        )
        os.remove(name + ".vocab")
        sp = spm.SentencePieceProcessor(model_file=name + ".model")
        for row in rows:
            row[name] = sp.encode(row["text"], add_bos=True, add_eos=True)
    with open("expected-spm.jsonl", "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
