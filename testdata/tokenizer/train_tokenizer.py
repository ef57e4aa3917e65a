"""Train the small byte-level BPE tokenizer in this folder (tokenizer.json) on corpus.txt.

Nothing is downloaded: the tokenizer is trained from scratch on the committed text.
Also writes expected.jsonl: for each line of corpus.txt, the ids and attention mask that
the Python `tokenizers` package gives (with special tokens), so the Rust tests can check
that infeed's tokenization is the same.

Usage (needs `pip install tokenizers==0.23.3`, e.g. in a venv):
    python testdata/tokenizer/train_tokenizer.py
"""

import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB_SIZE = 400
SPECIAL = ["<pad>", "<s>", "</s>"]


def main():
    corpus = os.path.join(HERE, "corpus.txt")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([corpus], trainer)
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    tok.save(os.path.join(HERE, "tokenizer.json"))

    with open(corpus, encoding="utf-8") as f:
        lines = f.read().splitlines()
    with open(os.path.join(HERE, "expected.jsonl"), "w", encoding="utf-8") as out:
        for line in lines:
            enc = tok.encode(line)
            row = {"text": line, "input_ids": enc.ids, "attention_mask": enc.attention_mask}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
