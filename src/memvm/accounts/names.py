"""What an organization's name and a key's label may hold. Both are printed as they are by
`memvm keys list` and shown in the console, so neither may carry a control character (ESC, CR, LF
would rewrite an operator's terminal) or an invisible one (a right-to-left override reorders what
follows it). Pure: the command line checks its `--org` and `--name` with these before it starts."""

import re

MAX_ORGANIZATION_NAME = 100
MAX_KEY_LABEL = 200
# Letters and digits of any script, '_', '.', '-', and spaces between them.
_ORGANIZATION_NAME = re.compile(rf"[\w.-](?:[\w .-]{{0,{MAX_ORGANIZATION_NAME - 2}}}[\w.-])?")


def check_organization_name(name: str) -> str:
    if _ORGANIZATION_NAME.fullmatch(name) is None:
        raise ValueError(
            f"{name[: MAX_ORGANIZATION_NAME + 1]!r} is not an organization name: use 1-{MAX_ORGANIZATION_NAME} letters, "
            "digits, '_', '.', '-' and spaces, not starting or ending with a space"
        )
    return name


def check_key_label(label: str) -> str:
    if len(label) > MAX_KEY_LABEL or not label.isprintable():
        raise ValueError(
            f"{label[: MAX_KEY_LABEL + 1]!r} is not a key label: use at most {MAX_KEY_LABEL} printable characters "
            "(no control characters or line breaks)"
        )
    return label
