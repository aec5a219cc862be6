"""Code and math markup in a text.

- A fenced block opens with three backticks and closes with the next three;
  an unclosed fence at the start of a line runs to the end of the text (as
  in CommonMark).
- Inline code is a backtick span on one line outside fenced blocks.
- Math notation is a LaTeX macro from ``MACROS`` (``\\frac``, ``\\sum``,
  ``\\int``, ``\\forall``, ...), or text between ``$$ $$``, ``\\( \\)``,
  ``\\[ \\]`` or ``$ $``. A ``$ $`` pair follows pandoc: the opening ``$``
  has a non-space to its right, the closing one a non-space to its left and
  no digit after it, so "costs $5 and $10" is not math.
  Math is looked for outside code, where ``$`` is a shell variable.
"""

from __future__ import annotations

import re

FENCED = re.compile(r"(?s:```.*?```)|(?ms:^[ \t]*```.*\Z)")
INLINE_CODE = re.compile(r"`[^`\n]+`")
MACROS = (
    "frac", "dfrac", "tfrac", "sum", "prod", "int", "iint", "iiint", "oint", "lim", "limsup", "liminf", "forall",
    "exists", "nexists", "sqrt", "partial", "nabla", "infty", "leq", "geq", "neq", "approx", "equiv", "cdot",
    "times", "notin", "subseteq", "subset", "supseteq", "supset", "cup", "cap", "setminus", "emptyset", "varnothing",
    "mathbb", "mathcal", "mathbf", "mathrm", "binom", "overline", "alpha", "beta", "gamma", "delta", "epsilon",
    "varepsilon", "theta", "lambda", "sigma", "omega", "phi", "varphi", "Gamma", "Delta", "Sigma", "Omega",
    "Rightarrow", "Leftrightarrow", "implies", "iff", "mapsto", "langle", "rangle", "ldots", "cdots", "pmod",
)
MATH = re.compile(
    r"\\(?:" + "|".join(MACROS) + r")(?![A-Za-z])"
    r"|\\begin\{(?:equation|align|gather|multline|matrix|pmatrix|bmatrix|vmatrix|cases|proof)\*?\}"
    r"|(?<![\\$])\$[^\s$](?:[^$\n]*[^\s$\\])?\$(?![\d$])"
)


def has_fence(text: str) -> bool:
    return "```" in text and FENCED.search(text) is not None


def without_fences(text: str) -> str:
    """The text with fenced blocks replaced by a line break (which also ends a sentence)."""
    return FENCED.sub("\n", text) if "```" in text else text


def has_inline_code(prose: str) -> bool:
    """Inline code in a text already without fences."""
    return "`" in prose and INLINE_CODE.search(prose) is not None


# Display and inline delimiters, found by a linear scan: a regex with a lazy ".*?\S.*?" between
# them backtracks cubically on an opener that is never closed, which a client can send.
DELIMITERS = (("$$", "$$"), ("\\(", "\\)"), ("\\[", "\\]"))


def has_math(prose: str) -> bool:
    """Math notation in a text already without fences."""
    if "\\" not in prose and "$" not in prose:
        return False
    prose = INLINE_CODE.sub(" ", prose)
    return _delimited(prose) or MATH.search(prose) is not None


def _delimited(text: str) -> bool:
    """Some non-blank text between an opening delimiter and the next closing one."""
    for opening, closing in DELIMITERS:
        start = text.find(opening)
        while start != -1:
            end = text.find(closing, start + len(opening))
            if end == -1:
                break   # no later opener can be closed either
            if text[start + len(opening):end].strip():
                return True
            start = text.find(opening, end + len(closing))
    return False
