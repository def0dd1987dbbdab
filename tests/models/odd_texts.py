"""Texts that exercise an encoder's edges: lengths from empty to past the tiny model's 128
positions, cases, accents and CJK. Shared by the encoders that must agree with torch."""

ODD_TEXTS = [
    "",
    "A man is playing a guitar.",
    "ÉCOLE, café and naïve résumé",
    "数据库 查询 很快",
    "word " * 300,
    "Short",
    "The cat sleeps on the sofa while the dog barks at the mailman outside.",
]
