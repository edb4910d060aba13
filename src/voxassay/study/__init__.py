"""Human rating studies: the study format, ``study create``, the store, import and the web app.

Only the format is imported here (light); the rest loads on use.
"""

from voxassay.study.format import (
    Eval,
    HeadphoneCheck,
    Item,
    Profile,
    Questions,
    Scale,
    Stimulus,
    Study,
    load_questions,
    load_study,
)

__all__ = [
    "Eval",
    "HeadphoneCheck",
    "Item",
    "Profile",
    "Questions",
    "Scale",
    "Stimulus",
    "Study",
    "load_questions",
    "load_study",
]
