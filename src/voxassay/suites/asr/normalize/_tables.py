"""Word lists and mapping tables used by the English normalizers.

Two layers:

* ``WHISPER_*``: the tables of OpenAI Whisper's English normalizer (the base that the Open ASR
  Leaderboard forked). The ~1.7k British->American spelling pairs are *not* here: they are read
  at run time from the ``whisper_normalizer`` package (see ``_spelling.py``).
* ``OAL_*``: what the Open ASR Leaderboard (``huggingface/open_asr_leaderboard`` at commit
  d1e99b2) changes or adds on top: a longer filler list, pronoun-only ``'s`` expansion, joined
  compounds, spelling-table corrections and name-variant folding.

Regex patterns are applied to lower-cased text, in list order.
"""

from __future__ import annotations

from typing import Final

# --------------------------------------------------------------------------------------------
# Whisper base
# --------------------------------------------------------------------------------------------

#: Hesitations removed as whole words.
WHISPER_FILLERS: Final = ("hmm", "mm", "mhm", "mmm", "uh", "um")

#: Informal forms expanded first: (pattern, replacement, literal that must occur for a match).
WHISPER_INFORMAL: Final = (
    (r"\bwon't\b", "will not", "won't"),
    (r"\bcan't\b", "can not", "can't"),
    (r"\blet's\b", "let us", "let's"),
    (r"\bain't\b", "aint", "ain't"),
    (r"\by'all\b", "you all", "y'all"),
    (r"\bwanna\b", "want to", "wanna"),
    (r"\bgotta\b", "got to", "gotta"),
    (r"\bgonna\b", "going to", "gonna"),
    (r"\bi'ma\b", "i am going to", "i'ma"),
    (r"\bimma\b", "i am going to", "imma"),
    (r"\bwoulda\b", "would have", "woulda"),
    (r"\bcoulda\b", "could have", "coulda"),
    (r"\bshoulda\b", "should have", "shoulda"),
    (r"\bma'am\b", "madam", "ma'am"),
)

#: Abbreviated titles, expanded when they stand as a whole word (a space is appended).
WHISPER_TITLES: Final = {
    "mr": "mister",
    "mrs": "missus",
    "st": "saint",
    "dr": "doctor",
    "prof": "professor",
    "capt": "captain",
    "gov": "governor",
    "ald": "alderman",
    "gen": "general",
    "sen": "senator",
    "rep": "representative",
    "pres": "president",
    "rev": "reverend",
    "hon": "honorable",
    "asst": "assistant",
    "assoc": "associate",
    "lt": "lieutenant",
    "col": "colonel",
    "jr": "junior",
    "sr": "senior",
    "esq": "esquire",
}

#: Perfect tenses that disambiguate 'd / 's (applied before the general clitics).
WHISPER_PERFECT: Final = (
    (r"'d been\b", " had been", "'d been"),
    (r"'s been\b", " has been", "'s been"),
    (r"'d gone\b", " had gone", "'d gone"),
    (r"'s gone\b", " has gone", "'s gone"),
    (r"'d done\b", " had done", "'d done"),
    (r"'s got\b", " has got", "'s got"),
)

#: The 's clitic as Whisper expands it: always to " is" (so "dog's" becomes "dog is").
WHISPER_S_CLITIC: Final = (r"'s\b", " is", "'s")

#: General clitics, in order; the ``'s`` entry is inserted after ``'re``.
WHISPER_CLITICS_BEFORE_S: Final = ((r"n't\b", " not", "n't"), (r"'re\b", " are", "'re"))
WHISPER_CLITICS_AFTER_S: Final = (
    (r"'d\b", " would", "'d"),
    (r"'ll\b", " will", "'ll"),
    (r"'t\b", " not", "'t"),
    (r"'ve\b", " have", "'ve"),
    (r"'m\b", " am", "'m"),
)

# --------------------------------------------------------------------------------------------
# Open ASR Leaderboard extensions (d1e99b2)
# --------------------------------------------------------------------------------------------

#: The leaderboard's longer filler list. Note that elongations are not covered ("uhh" stays).
OAL_FILLERS: Final = (
    *WHISPER_FILLERS,
    "ah",
    "aha",
    "ahh",
    "ahm",
    "eh",
    "ehehe",
    "em",
    "hm",
    "huh",
    "hum",
    "mhum",
    "uhm",
    "umm",
    "uhuh",
)

#: Only these words have their 's expanded to "is" (possessives such as "dog's" are kept).
OAL_S_PRONOUNS: Final = (
    "it",
    "he",
    "she",
    "what",
    "that",
    "who",
    "here",
    "there",
    "how",
    "when",
    "where",
    "why",
    "this",
)

#: Split forms joined into one token, applied after punctuation became spaces (so "e-mail"
#: arrives as "e mail"). (first word, second word, joined form). These sixteen are the table
#: at d1e99b2; the two elongation folds a later revision appends ("ohh"/"ooh" -> "oh") are
#: deliberately absent, so "ohh" stays a word here.
OAL_COMPOUNDS: Final = (
    ("et", "cetera", "etc"),
    ("al", "right", "alright"),
    ("all", "right", "alright"),
    ("how", "ever", "however"),
    ("wi", "fi", "wifi"),
    ("hi", "fi", "hifi"),
    ("lo", "fi", "lofi"),
    ("sci", "fi", "scifi"),
    ("e", "mail", "email"),
    ("e", "book", "ebook"),
    ("e", "commerce", "ecommerce"),
    ("x", "ray", "xray"),
    ("t", "shirt", "tshirt"),
    ("a", "m", "am"),
    ("p", "m", "pm"),
    ("o", "k", "okay"),
)

#: Entries the leaderboard adds to (or corrects in) Whisper's British->American table.
OAL_SPELLING_SET: Final = {
    "ok": "okay",
    "kay": "okay",
    "etcetera": "etc",
    "mm": "hmm",
    "flyer": "flier",
    "archaeology": "archeology",
    "archaeological": "archeological",
    "cancellation": "cancelation",
    "cancellations": "cancelations",
    "pummelled": "pummeled",
    "pummelling": "pummeling",
    "snowploughs": "snowplows",
    "travelogue": "travelog",
    "travelogues": "travelogs",
}

#: Entries of Whisper's table that the leaderboard's copy does not have.
OAL_SPELLING_DROP: Final = (
    "flyer / flier",
    "archeological",
    "cancelation",
    "cancelations",
    "travelog",
    "travelogs",
)

#: Name variants folded to one spelling (applied after the spelling table).
OAL_NAMES: Final = {
    # double letters and endings
    "alan": "allen",
    "allan": "allen",
    "bridgette": "bridget",
    "charly": "charlie",
    "charley": "charlie",
    "garry": "gary",
    "gregg": "greg",
    "jacky": "jackie",
    "joann": "joanne",
    "joane": "joanne",
    "kellye": "kelly",
    "kelli": "kelly",
    "kelley": "kelly",
    "lilly": "lily",
    "micheal": "michael",
    "michele": "michelle",
    "mollie": "molly",
    "phillip": "philip",
    "sallie": "sally",
    "stacey": "stacy",
    "stacie": "stacy",
    "tracey": "tracy",
    "tracie": "tracy",
    "bret": "brett",
    "carrol": "carol",
    "carole": "carol",
    "carroll": "carol",
    "allison": "alison",
    "alyson": "alison",
    "russel": "russell",
    "douglass": "douglas",
    "dominick": "dominic",
    "robb": "rob",
    # chr / kr
    "kris": "chris",
    "kristopher": "christopher",
    "cristopher": "christopher",
    "kristina": "christina",
    "kristen": "kristin",
    # c / k
    "karl": "carl",
    "kathy": "cathy",
    "katherine": "catherine",
    "kathryn": "catherine",
    "catharine": "catherine",
    "erik": "eric",
    "erick": "eric",
    "caren": "karen",
    "caryn": "karen",
    "karin": "karen",
    "katelyn": "caitlin",
    "kaitlyn": "caitlin",
    "kaitlin": "caitlin",
    "nikole": "nicole",
    "veronika": "veronica",
    "viktor": "victor",
    "viktoria": "victoria",
    "kevan": "kevin",
    "patrik": "patrick",
    "frederik": "frederick",
    "fredrick": "frederick",
    "lukas": "lucas",
    # silent letters, other spellings
    "ann": "anne",
    "jon": "john",
    "johnathan": "jonathan",
    "jonathon": "jonathan",
    "sara": "sarah",
    "mathew": "matthew",
    "nicolas": "nicholas",
    "rachael": "rachel",
    "rebekah": "rebecca",
    "devorah": "deborah",
    "theresa": "teresa",
    "suzanne": "susanne",
    "antony": "anthony",
    "martyn": "martin",
    "denis": "dennis",
    "laurence": "lawrence",
    "tomas": "thomas",
    "tobey": "toby",
    # mac / mc
    "macarthur": "mcarthur",
    "macartney": "mccartney",
    "macarthy": "mccarthy",
    "maccarthy": "mccarthy",
    "macdonald": "mcdonald",
    "mackay": "mckay",
    "mackenzie": "mckenzie",
    "macleod": "mcleod",
    "maclean": "mclean",
    "macmillan": "mcmillan",
    "macintosh": "mcintosh",
    "macintyre": "mcintyre",
    "macnamara": "mcnamara",
    "macgowan": "mcgowan",
    # transliterations
    "mohamad": "mohammed",
    "mohamed": "mohammed",
    "mohammad": "mohammed",
    "muhammad": "mohammed",
    "muhamad": "mohammed",
    "muhammed": "mohammed",
    "mouhamed": "mohammed",
    "mouhamad": "mohammed",
    "mahomet": "mohammed",
    "fatimah": "fatima",
    "yusuf": "yousef",
    "yusef": "yousef",
    "myriam": "miriam",
    "rajeev": "rajiv",
    # homophones
    "alphonso": "alfonso",
    "bryan": "brian",
    "geoffrey": "jeffrey",
    "jeffery": "jeffrey",
    "geoff": "jeff",
    "neal": "neil",
    "shaun": "sean",
    "shawn": "sean",
    "shayne": "shane",
    "stephen": "steven",
    "toni": "tony",
    "leigh": "lee",
    "lewis": "louis",
    "marc": "mark",
    "meghan": "megan",
    "nathalie": "natalie",
    "robyn": "robin",
    "rodger": "roger",
    "linsey": "lindsay",
    "lindsey": "lindsay",
    "zackary": "zachary",
    "zachery": "zachary",
    "zak": "zach",
    "sheri": "sherry",
    "cheri": "sherry",
    "sherrie": "sherry",
    "terri": "terry",
    "lori": "laurie",
    "jaime": "jamie",
    "jayson": "jason",
    "lesley": "leslie",
    "lynda": "linda",
    "lynne": "lynn",
    "gayle": "gail",
    "rhonda": "ronda",
    "yvonne": "ivonne",
    "stewart": "stuart",
    "walther": "walter",
    "symon": "simon",
    "collin": "colin",
    "dillon": "dylan",
    "aron": "aaron",
    "artur": "arthur",
    "henri": "henry",
    "josef": "joseph",
    "pieter": "peter",
}
