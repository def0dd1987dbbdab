"""`semsearch word-vectors` (train or export word vectors) and `semsearch word-model` (a
word-vector model folder: averaged vectors, or a BiLSTM / CNN to train with `semsearch train`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from semsearch.cli.common import app, console, user_errors
from semsearch.cli.options import ModelOutput
from semsearch.errors import SemsearchError


@app.command("word-vectors")
@user_errors
def word_vectors(
    output: Annotated[
        Path, typer.Argument(help="The word2vec text file to write (.txt or .txt.gz).")
    ],
    text: Annotated[
        list[str] | None,
        typer.Option("--text", help="FILE.parquet:COLUMN[,COLUMN] to train on (repeatable)."),
    ] = None,
    from_model: Annotated[
        str | None,
        typer.Option(
            help="Instead of training, export this transformer's input token "
            "embeddings (whole words only), e.g. default."
        ),
    ] = None,
    method: Annotated[str, typer.Option(help="word2vec or fasttext (gensim).")] = "word2vec",
    dimension: Annotated[int, typer.Option(help="Vector size.")] = 300,
    epochs: Annotated[int, typer.Option(help="Passes over the texts.")] = 5,
    min_count: Annotated[int, typer.Option(help="Ignore words seen fewer times.")] = 5,
    limit: Annotated[
        int | None, typer.Option(help="Read at most this many rows per column.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seeds gensim.")] = 0,
) -> None:
    """Write word vectors in word2vec text format, for `semsearch word-model`.

    Train them with gensim on your own texts (pip install -e '.[baselines]'), or take a
    transformer's input token-embedding matrix.
    """
    from semsearch.models.word_vectors import token_embedding_vectors, write_word_vectors
    from semsearch.training.word_vectors import WordVectorOptions, corpus_texts, train_word_vectors

    if bool(text) == bool(from_model):
        raise SemsearchError(
            "give either --text sources to train on or --from-model, not both or neither"
        )
    if from_model:
        vectors = token_embedding_vectors(from_model)
    else:
        options = WordVectorOptions(
            method=method,
            dimension=dimension,
            epochs=epochs,  # type: ignore[arg-type]
            min_count=min_count,
            seed=seed,
        )
        vectors = train_word_vectors(corpus_texts(text or [], limit), options)
    write_word_vectors(vectors, output)
    console.print(
        f"{len(vectors.words)} {vectors.dimension}-d word vectors -> {output}",
        markup=False,
        highlight=False,
    )


@app.command("word-model")
@user_errors
def word_model(
    vectors: Annotated[
        Path, typer.Argument(help="A word2vec text file (`semsearch word-vectors`).")
    ],
    output: ModelOutput,
    layer: Annotated[str, typer.Option(help="none (averaged word vectors), lstm or cnn.")] = "none",
    hidden: Annotated[
        int, typer.Option(help="LSTM units per direction, or CNN channels per kernel.")
    ] = 256,
    pooling: Annotated[str, typer.Option(help="mean, max or cls.")] = "mean",
    normalize: Annotated[bool, typer.Option(help="L2-normalise sentence vectors.")] = False,
    dimension: Annotated[
        int | None, typer.Option(help="Refuse vectors of another dimension.")
    ] = None,
    update_embeddings: Annotated[
        bool, typer.Option(help="Let training change the word vectors.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seeds the layer's initial weights.")] = 0,
) -> None:
    """Make a word-vector model folder (sentence-transformers layout).

    With `--layer none` it is ready to index (`semsearch build --model FOLDER`); an lstm or
    cnn starts untrained: train it with `semsearch train --model FOLDER --lr 1e-3`.
    """
    from semsearch.models.word_encoder import WORD_LAYERS, WordLayerConfig
    from semsearch.models.word_model import WordModelOptions, make_word_model

    if layer not in WORD_LAYERS:
        raise SemsearchError(f"unknown layer {layer!r}: choose one of {', '.join(WORD_LAYERS)}")
    if output.exists() and any(output.iterdir()):
        raise SemsearchError(f"{output} exists and is not empty: choose another --output")
    options = WordModelOptions(
        layer=WordLayerConfig(layer, hidden),  # type: ignore[arg-type]
        pooling=pooling,
        normalize=normalize,
        dimension=dimension,
        update_embeddings=update_embeddings,
        seed=seed,
    )
    folder = make_word_model(vectors, output, options)
    console.print(
        f"word-vector model ({layer}, {pooling} pooling) -> {folder}", markup=False, highlight=False
    )
