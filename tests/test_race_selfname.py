"""Blinding against the ways a run names itself, and sparing the runs that name nobody it is.

The project's own list of self-naming forms, built from a few names (an alias, a served id, a
family, a vendor, and a well-known model and its maker): each is caught when the masked text
keeps no form of the name and the run is found naming itself. Beside it, honest answers about
*other* models (masked, never voided), families that are English words used as words, and the
task's own words (never masked)."""

import base64

import pytest

from panelist.metrics.race.blind import Masker, Names, own_of
from panelist.metrics.race.normal import fold
from panelist.metrics.roster.roster import Endpoint, Model

ZEPHYR = Model("zephyr-mini", "alpha", "aurora/zephyr-mini-v2", "zephyr")
GPT = Model("gpt-4o", "alpha", "openai/gpt-4o", "gpt")
CLAUDE = Model("claude-s", "alpha", "anthropic/claude-3-5-sonnet", "claude")
CAREFUL = Model("careful-one", "alpha", "acme/careful-one", "careful")
SWIFT = Model("swift-two", "alpha", "acme/swift-two", "swift")
SONNET = Model("sonnet-x", "alpha", "acme/sonnet-x", "sonnet")
ROSTER = [ZEPHYR, GPT, CLAUDE, CAREFUL, SWIFT, SONNET]
ENDPOINTS = [Endpoint("alpha", "http://10.0.0.7:8000/v1", "K")]
TASK = "Review the pull request below and list its bugs."


def masker(task=TASK):
    return Masker(Names.of(ROSTER, ENDPOINTS), [task])


def b64(text):
    return base64.b64encode(text.encode()).decode()


def i_am(x):
    return f"I'm {x}, here to help with the review."


def made_by(x):
    return f"I was trained by {x}. The review follows."


# (what it shows, who wrote it, the name it must not leak, the text)
FORMS = [
    (label, writer, name, make(x))
    for label, writer, name, make, x in [
        # the alias
        ("alias", ZEPHYR, "zephyrmini", i_am, "zephyr-mini"),
        ("alias upper case", ZEPHYR, "zephyrmini", i_am, "ZEPHYR-MINI"),
        ("alias by a space", ZEPHYR, "zephyrmini", i_am, "Zephyr Mini"),
        ("alias joined, CamelCase", ZEPHYR, "zephyrmini", i_am, "ZephyrMini"),
        ("alias joined, lower case", ZEPHYR, "zephyrmini", i_am, "zephyrmini"),
        ("alias by an underscore", ZEPHYR, "zephyrmini", i_am, "zephyr_mini"),
        ("alias by a dot", ZEPHYR, "zephyrmini", i_am, "zephyr.mini"),
        ("Cyrillic e", ZEPHYR, "zephyrmini", i_am, "Z\u0435phyr-Mini"),
        ("Cyrillic M and i", ZEPHYR, "zephyrmini", i_am, "Zephyr-\u041c\u0456n\u0456"),
        ("Greek Zeta", ZEPHYR, "zephyrmini", i_am, "\u0396ephyr-Mini"),
        ("Greek Mu", ZEPHYR, "zephyrmini", i_am, "Zephyr-\u039cini"),
        ("soft hyphen", ZEPHYR, "zephyrmini", i_am, "Zeph\u00adyr-Mini"),
        ("zero-width space", ZEPHYR, "zephyrmini", i_am, "Zep\u200bhyr-Mini"),
        ("zero-width joiner", ZEPHYR, "zephyrmini", i_am, "Zephyr\u200d-Mini"),
        ("zero-width non-joiner", ZEPHYR, "zephyrmini", i_am, "Ze\u200cphyr Mini"),
        ("word joiner", ZEPHYR, "zephyrmini", i_am, "Zephyr\u2060Mini"),
        ("byte-order mark", ZEPHYR, "zephyrmini", i_am, "Zephyr\ufeff-Mini"),
        ("variation selector", ZEPHYR, "zephyrmini", i_am, "Ze\ufe0fphyr-Mini"),
        ("combining accent", ZEPHYR, "zephyrmini", i_am, "Ze\u0301phyr-Mini"),
        ("accented letter", ZEPHYR, "zephyrmini", i_am, "Z\u00e9phyr-Mini"),
        (
            "full-width letters",
            ZEPHYR,
            "zephyrmini",
            i_am,
            "\uff3a\uff45\uff50\uff48\uff59\uff52-\uff2d\uff49\uff4e\uff49",
        ),
        (
            "mathematical bold",
            ZEPHYR,
            "zephyrmini",
            i_am,
            "\U0001d419\U0001d41e\U0001d429\U0001d421\U0001d432\U0001d42b-Mini",
        ),
        ("spaced letters", ZEPHYR, "zephyrmini", i_am, "Z e p h y r - m i n i"),
        ("a space inside a word", ZEPHYR, "zephyrmini", i_am, "Zep hyr Mini"),
        ("dotted letters", ZEPHYR, "zephyrmini", i_am, "Z.e.p.h.y.r.M.i.n.i"),
        ("markdown bold", ZEPHYR, "zephyrmini", i_am, "**Zephyr**-mini"),
        ("markdown italic inside", ZEPHYR, "zephyrmini", i_am, "Zep*hyr*-Mini"),
        ("markdown code", ZEPHYR, "zephyrmini", i_am, "`zephyr-mini`"),
        ("markdown underscores", ZEPHYR, "zephyrmini", i_am, "_Zephyr_ Mini"),
        ("markdown strike", ZEPHYR, "zephyrmini", i_am, "~~Zephyr~~Mini"),
        ("a newline", ZEPHYR, "zephyrmini", i_am, "Zephyr\nMini"),
        ("hyphenated over a newline", ZEPHYR, "zephyrmini", i_am, "Zeph-\nyr-Mini"),
        ("percent-encoded hyphen", ZEPHYR, "zephyrmini", i_am, "zephyr%2Dmini"),
        ("percent-encoded letter", ZEPHYR, "zephyrmini", i_am, "%5Aephyr-mini"),
        ("percent-encoded space", ZEPHYR, "zephyrmini", i_am, "Zephyr%20Mini"),
        ("base64 of the alias", ZEPHYR, "zephyrmini", i_am, b64("zephyr-mini")),
        ("base64 of a sentence", ZEPHYR, "zephyrmini", lambda x: x, b64("I am zephyr-mini.")),
        ("non-breaking hyphen", ZEPHYR, "zephyrmini", i_am, "Zephyr\u2011Mini"),
        ("en dash", ZEPHYR, "zephyrmini", i_am, "Zephyr\u2013Mini"),
        ("no-break space", ZEPHYR, "zephyrmini", i_am, "Zephyr\u00a0Mini"),
        # the served id
        ("served id", ZEPHYR, "zephyrminiv2", i_am, "aurora/zephyr-mini-v2"),
        ("served id's model part", ZEPHYR, "zephyrminiv2", i_am, "zephyr-mini-v2"),
        ("served id in words", ZEPHYR, "zephyrminiv2", i_am, "Zephyr Mini v2"),
        ("served id joined", ZEPHYR, "zephyrminiv2", i_am, "ZephyrMiniV2"),
        ("served id, Cyrillic e", ZEPHYR, "zephyrminiv2", i_am, "aurora/z\u0435phyr-mini-v2"),
        # the family
        ("family", ZEPHYR, "zephyr", i_am, "Zephyr"),
        ("family upper case", ZEPHYR, "zephyr", i_am, "ZEPHYR"),
        ("family, Cyrillic e", ZEPHYR, "zephyr", i_am, "Z\u0435phyr"),
        ("family, zero-width space", ZEPHYR, "zephyr", i_am, "Zeph\u200byr"),
        # the vendor
        ("vendor", ZEPHYR, "aurora", made_by, "Aurora"),
        ("vendor upper case", ZEPHYR, "aurora", made_by, "AURORA"),
        ("vendor, Cyrillic A", ZEPHYR, "aurora", made_by, "\u0410urora"),
        ("vendor, soft hyphen", ZEPHYR, "aurora", made_by, "Au\u00adrora"),
        ("vendor in bold", ZEPHYR, "aurora", made_by, "**Aurora**"),
        # a well-known model and its maker
        ("GPT-4o", GPT, "gpt4o", i_am, "GPT-4o"),
        ("gpt4o", GPT, "gpt4o", i_am, "gpt4o"),
        ("GPT 4o", GPT, "gpt4o", i_am, "GPT 4o"),
        ("GPT non-breaking hyphen 4o", GPT, "gpt4o", i_am, "GPT\u20114o"),
        ("GPT-4o, Cyrillic P, T, o", GPT, "gpt4o", i_am, "G\u0420\u0422-4\u043e"),
        ("G P T - 4 o", GPT, "gpt4o", i_am, "G P T - 4 o"),
        ("its vendor's product", GPT, "chatgpt", i_am, "ChatGPT"),
        ("OpenAI", GPT, "openai", made_by, "OpenAI"),
        ("Open AI", GPT, "openai", made_by, "Open AI"),
        ("OpenAI, Cyrillic O", GPT, "openai", made_by, "\u041epenAI"),
        ("OpenAI in base64", GPT, "openai", made_by, b64("OpenAI")),
        ("Claude, Cyrillic a", CLAUDE, "claude", i_am, "Cl\u0430ude"),
    ]
]


def letters(text):
    """The letters and digits of ``text`` as masking folds it, in a row, lower case."""
    return "".join(c for c in fold(text).text.lower() if c.isalnum())


def leaks(name, masked):
    return name in letters(masked) or any("".join(h.key) == name for h in masker().hits(masked))


def test_the_list_holds_66_forms():
    assert len(FORMS) == 66
    assert len({label for label, *_ in FORMS}) == 66


def test_at_least_60_of_66_self_naming_forms_are_masked_and_void():
    missed = []
    for label, writer, name, text in FORMS:
        masked = masker()(text)
        if leaks(name, masked) or not masker().itself(text, own_of(writer)):
            missed.append(f"{label}: {text!r} -> {masked!r}")
    caught = len(FORMS) - len(missed)
    assert caught >= 60, "missed:\n" + "\n".join(missed)
    assert missed == [], "missed:\n" + "\n".join(missed)


@pytest.mark.parametrize("label, writer, name, text", FORMS, ids=[f[0] for f in FORMS])
def test_masked_text_keeps_no_form_of_the_name(label, writer, name, text):
    masked = masker()(text)
    assert not leaks(name, masked), masked
    assert "[model]" in masked or "[vendor]" in masked or "[link]" in masked


@pytest.mark.parametrize("label, writer, name, text", FORMS, ids=[f[0] for f in FORMS])
def test_the_void_names_the_name_and_its_form_for_a_person(label, writer, name, text):
    found = masker().itself(text, own_of(writer))
    assert found
    e = found[0]
    assert "".join(c for c in e["name"].lower() if c.isalnum()) in (name, "aurorazephyrminiv2")
    assert e["as"] in ("alias", "served id", "family", "vendor", "its vendor's model")
    assert e["excerpt"] and e["written"]
    assert "\u200b" not in e["written"] and "\u00ad" not in e["written"], (
        "invisible characters are spelt out for the reader"
    )


# honest answers about AI models, by gpt-4o, naming other models: masked, never voided
ABOUT_OTHERS = [
    "This is Claude's main advantage: a long context window.",
    "Claude is an AI model made by Anthropic, tuned for careful writing.",
    "As Gemini 1.5 Pro shows, I think long context matters most.",
    "Gemini here refers to Google's family of models.",
    "This is Llama 3's strength: open weights you can host yourself.",
    "Mistral Large is a model developed by Mistral AI in Paris.",
    "I'm comparing Claude 3.5 Sonnet with Gemini 1.5 Pro below.",
    "As Claude, the assistant from Anthropic, would put it, I should cite sources.",
    "DeepSeek-V3 here beats Llama 3.1 405B on math.",
    "This is Qwen2.5-72B: strong at code and at many languages.",
    "My recommendation: Claude for writing, Gemini for long documents.",
    "I'd pick Llama 3.1 70B, an AI model built by Meta, for self-hosting.",
    "Grok is a chatbot created by xAI and trained on posts from X.",
    "This is Mistral's advantage: permissive licensing.",
    "As a model trained by Anthropic, Claude refuses some requests; I find that helpful.",
    "Phi-3 here is the smallest option, by Microsoft.",
    "Gemma 2 is an open model released by Google DeepMind.",
    "This is Command R+: retrieval is its focus.",
    "I am impressed by Claude 3 Opus; it's a language model developed by Anthropic.",
    "Kimi K2 here, from Moonshot AI, handles long contexts.",
]


def test_answers_about_other_models_are_masked_and_at_most_one_of_20_voided():
    assert len(ABOUT_OTHERS) == 20
    voided = [t for t in ABOUT_OTHERS if masker().itself(t, own_of(GPT))]
    assert len(voided) <= 1, voided
    for text in ABOUT_OTHERS:
        masked = masker()(text)
        for name in (
            "claude",
            "gemini",
            "llama",
            "mistral",
            "anthropic",
            "google",
            "qwen",
            "deepseek",
            "grok",
            "xai",
            "phi3",
            "gemma",
            "kimi",
            "moonshot",
        ):
            assert name not in letters(masked).replace("model", ""), (name, masked)


def test_a_run_mentioning_its_own_model_in_the_third_person_is_masked_not_voided():
    # "GPT-4o's main advantage" is how an answer about models reads: the judge sees [model]
    text = "GPT-4o's main advantage is speed; OpenAI released it in 2024."
    assert masker().itself(text, own_of(GPT)) == []
    assert masker()(text) == "[model]'s main advantage is speed; [vendor] released it in 2024."
    # the answers above, written by a Claude model, speak of Claude and Anthropic in the third
    # person: none is its writer saying who it is
    assert [t for t in ABOUT_OTHERS if masker().itself(t, own_of(CLAUDE))] == []


ORDINARY = [
    (CAREFUL, "This is a careful review."),
    (CAREFUL, "I'm careful with dates."),
    (CAREFUL, "I am a careful reviewer, so I checked twice."),
    (CAREFUL, "As a careful reader, I noticed the off-by-one."),
    (CAREFUL, "I was careful to run the tests."),
    (CAREFUL, "Careful: the loop never ends."),
    (SWIFT, "I'm swift to answer: the bug is on line 3."),
    (SWIFT, "This is a swift reply."),
    (SWIFT, "The patch is written in Swift, and I'm sure it compiles."),
    (SONNET, "Here is a sonnet about the bug."),
    (SONNET, "I'm a sonnet lover, but here: line 3 is wrong."),
    (SONNET, "This is a sonnet, as you asked."),
]


@pytest.mark.parametrize("writer, text", ORDINARY, ids=[t for _, t in ORDINARY])
def test_a_family_that_is_an_english_word_used_as_a_word_never_voids(writer, text):
    assert masker().itself(text, own_of(writer)) == []


def test_a_plain_word_family_written_as_a_name_still_voids():
    assert masker().itself("I'm Careful, an AI assistant.", own_of(CAREFUL))
    assert masker().itself("I'm careful-one, happy to help.", own_of(CAREFUL))


def test_the_tasks_own_words_are_never_masked_and_never_void():
    task = "Write a careful, swift review of this sonnet, and say why Gemini is a constellation."
    said = (
        "A careful, swift review: the sonnet scans well. Gemini is a constellation. "
        "I'm careful with meter."
    )
    m = masker(task)
    assert m(said) == said
    for writer in (CAREFUL, SWIFT, SONNET):
        assert m.itself(said, own_of(writer)) == []
    # a name with a version is still a name, even where the task uses the word
    assert m("careful-one wrote this") == "[model] wrote this"


def test_ordinary_words_and_encodings_that_name_nobody_survive():
    said = (
        "Use base64 such as aGVsbG8gd29ybGQ= or a URL like /a%20b; two llamas, a "
        "supernova, breakfast, the command line, O(1), and ThisIsNotAName; Tom &amp; "
        "Jerry, AT&T, C:\\new\\tmp and \\u00e9t\u00e9."
    )
    assert masker()(said) == said


def test_masking_replaces_the_original_characters_and_leaves_the_rest_as_written():
    said = "Before Z\u0435p\u200bhyr\u2011Mini, after.\nGPT\u20114o\u00a0and caf\u00e9 stay."
    assert masker()(said) == "Before [model], after.\n[model]\u00a0and caf\u00e9 stay."
    text, count = masker().mask("see zephyr%2Dmini and " + b64("made by aurora"))
    assert (text, count) == ("see [model] and [vendor]", 2)


@pytest.mark.parametrize(
    "written",
    [
        "Zeph&shy;yr-Mini",
        "Zephyr&#45;Mini",
        "Z&#x65;phyr-Mini",
        "Z\\u0065phyr-Mini",
        "Zephyr\\nMini",
        "Zeph\\u00adyr Mini",
        "Zephyr\u202e-Mini",
        "Z\u200be\u200bp\u200bh\u200by\u200br",
    ],
)
def test_escaped_forms_of_a_name_are_read_as_the_name(written):
    said = f"I'm {written}, here to help."
    masked = masker()(said)
    assert masked == "I'm [model], here to help.", masked
    found = masker().itself(said, own_of(ZEPHYR))
    assert found and found[0]["written"] == written.replace("\u202e", "\\u202e").replace(
        "\u200b", "\\u200b"
    )
