"""Language choice: prompts and console labels follow the language the user typed."""

import re

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def detect_language(text: str) -> str:
    """"zh" when the text has any CJK ideograph, else "en"."""
    return "zh" if _CJK.search(text or "") else "en"
