"""What a race's judge reads: the masking, against a table of the ways a model names itself or
its maker, the ordinary words that must survive it, and the runs that name themselves anyway.
End to end on the simulated upstream: names in answers and tool arguments never reach the
judge, the task reaches it untouched, and a run that names itself is voided, never scored."""

import json

import pytest

from panelist.metrics.cli.main import main
from panelist.metrics.home import open_home
from panelist.metrics.race.benchmark import Benchmark, GradeBook, tool
from panelist.metrics.race.blind import Masker, Names, own_of
from panelist.metrics.race.registry import summary_of
from panelist.metrics.roster.roster import Endpoint, Model, Roster
from panelist.metrics.upstream.sim import SimUpstream

ROSTER = [
    Model("cheap-two", "alpha", "vendorx/cheap-small-v1", "cheapfam"),
    Model("sim-swift", "alpha", "sim-swift", "swift"),
]
ENDPOINTS = [Endpoint("alpha", "http://10.0.0.5:8000/v1", "K")]
LISTED = ["vendorx/other-large-v2", "acme/zeta-mini-v2"]  # in the catalog, not on the roster
TASK = "Give a swift answer: where is order 42?"


def masker():
    return Masker(Names.of(ROSTER, ENDPOINTS, LISTED), [TASK])


# (what a model wrote, the names that must not be left in it)
NAMING = [
    ("I'm Claude, made by Anthropic.", ["claude", "anthropic"]),
    ("I am ChatGPT, a large language model trained by OpenAI.", ["chatgpt", "openai"]),
    ("As GPT-4o, I cannot browse.", ["gpt", "4o"]),
    ("gpt-4o-mini here", ["gpt", "mini"]),
    ("I'm Gemini, a model from Google DeepMind.", ["gemini", "google", "deepmind"]),
    ("Gemini 1.5 Pro", ["gemini", "1.5", "pro"]),
    ("Llama 3.1 70B Instruct", ["llama", "70b", "instruct"]),
    ("I was built by Meta AI", ["meta"]),
    ("Meta's Llama 3 answers", ["meta", "llama"]),
    ("Mistral Large 2 and Mixtral-8x7B", ["mistral", "large", "mixtral", "8x7b"]),
    ("Qwen2.5-72B-Instruct, Tongyi Qianwen by Alibaba Cloud", ["qwen", "72b", "tongyi", "alibaba"]),
    ("DeepSeek-V3 (deepseek-chat)", ["deepseek", "v3"]),
    ("Grok 2, from xAI", ["grok", "xai"]),
    ("Phi-3-mini by Microsoft", ["phi", "microsoft"]),
    ("Gemma 2 9B", ["gemma", "9b"]),
    ("Command R+ by Cohere", ["command", "cohere"]),
    ("Kimi K2 by Moonshot AI; ERNIE Bot by Baidu", ["kimi", "k2", "moonshot", "ernie", "baidu"]),
    ("Claude 3.5 Sonnet, or the 3 Opus", ["claude", "sonnet", "opus"]),
    ("o1-preview and o3-mini", ["o1", "o3"]),
    ("see https://www.anthropic.com/claude for more", ["anthropic", "claude"]),
    ("platform.openai.com/docs and docs.x.ai/api", ["openai", "x.ai"]),
    ("huggingface.co/meta-llama/Llama-3.1-8B", ["hugging", "llama"]),
    ("I am cheap-two.", ["cheap-two"]),
    ("served as vendorx/cheap-small-v1", ["vendorx", "cheap-small"]),
    ("cheap-small-v1, Cheap Small V1", ["cheap-small", "cheap small"]),
    ("a cheapfam-mini-v2 build", ["cheapfam", "mini-v2"]),
    ("made by VendorX", ["vendorx"]),
    ("CLAUDE, cLaUdE, OpenAI, OPENAI", ["claude", "openai"]),
    ('{"note": "sent by claude-3-haiku", "model": "cheap-two"}', ["claude", "haiku", "cheap-two"]),
    ("reached at http://10.0.0.5:8000/v1 (10.0.0.5)", ["10.0.0.5", "8000"]),
    ("other-large-v2 and zeta-mini-v2, Zeta Mini v2", ["other-large", "zeta", "mini"]),
    ("Cl\u200baude and \uff23\uff4c\uff41\uff55\uff44\uff45", ["claude", "\u200b", "\uff23"]),
    ("Anthropic's Claude", ["anthropic", "claude"]),
    ("[simulated sim-swift] hello", ["sim-swift"]),
]


@pytest.mark.parametrize("said, names", NAMING, ids=[n for n, _ in NAMING])
def test_every_form_a_model_names_itself_by_is_masked(said, names):
    masked = masker()(said)
    for name in names:
        assert name not in masked.casefold(), f"{name!r} reached the judge in {masked!r}"
    assert (
        "[model]" in masked or "[vendor]" in masked or "[link]" in masked or "[endpoint]" in masked
    )


# ordinary words that look like names, in what a model wrote: none is masked
ORDINARY = [
    "A swift answer: order 42 shipped.",
    "I had breakfast.",
    "Use the command line.",
    "a meta-analysis of the data",
    "the phi coefficient",
    "a supernova",
    "Falcon Heavy",
    "his magnum opus",
    "a haiku about autumn",
    "two llamas",
    "O(1) time",
    "I'm happy to help.",
    "As a result, I checked twice.",
]


@pytest.mark.parametrize("said", ORDINARY)
def test_ordinary_words_survive_the_masking(said):
    assert masker()(said) == said
    for writer in ROSTER:
        assert masker().itself(said, own_of(writer)) == []


def test_a_name_the_task_uses_is_a_word_of_the_task_and_is_not_masked():
    # the family "swift" is a name, but the task asks for a swift answer: the word is the task's
    plain = Masker(Names.of(ROSTER, ENDPOINTS), [])
    assert plain("a swift answer") == "a [model] answer"
    assert masker()("a swift answer") == "a swift answer"
    # the constellation the task asks about is its subject, not a model
    stars = Masker(Names.of(ROSTER, ENDPOINTS), ["Which stars make up Gemini?"])
    assert stars("Gemini holds Castor and Pollux.") == "Gemini holds Castor and Pollux."
    # but a model's full served id is still its own name
    assert masker()("[simulated sim-swift]") == "[simulated [model]]"


CLAUDE = Model("claude-h", "alpha", "anthropic/claude-3-haiku", "claude")
GPT = Model("gpt-4o", "alpha", "openai/gpt-4o", "gpt")
GPT_MINI = Model("gpt-4o-mini", "alpha", "openai/gpt-4o-mini", "gpt")
GEMINI = Model("gem-pro", "alpha", "google/gemini-1.5-pro", "gemini")
ZORBLAX = Model("zorblax-7", "alpha", "zorblax-labs/zb-7", "zorblax")
QUUX = Model("quux", "alpha", "vendorq/quux-1", "quuxfam")
WRITERS = [CLAUDE, GPT, GPT_MINI, GEMINI, ZORBLAX, QUUX, *ROSTER]

# (who wrote it, where it says who it is or who made it: its own name or its vendor's)
SELF = [
    (CLAUDE, "I'm Claude, made by Anthropic."),
    (GPT, "As GPT-4o, I cannot do that."),
    (GEMINI, "I am an AI model made by Google."),
    (GPT, "I was trained by OpenAI."),
    (GPT_MINI, "gpt-4o-mini here"),
    (ZORBLAX, "I am Zorblax-7, at your service."),
    (QUUX, "I'm Quux, an AI assistant."),
    (ZORBLAX, "As an AI language model developed by Zorblax Labs, I cannot say."),
    (CLAUDE, "This is Claude speaking."),
    (ROSTER[0], "you're chatting with cheap-two"),
    (GPT, "I'm ChatGPT, a large language model."),
    (GPT_MINI, "As a model made by OpenAI, I keep answers short."),
    (CLAUDE, "Anthropic trained me to be careful."),
    (GEMINI, "I'm from Google."),
    (QUUX, "My underlying model is quux-1."),
]


def all_names():
    return Masker(Names.of([*ROSTER, *WRITERS], ENDPOINTS, LISTED), [TASK])


@pytest.mark.parametrize("writer, said", SELF, ids=[s for _, s in SELF])
def test_a_run_that_says_who_it_is_is_found_and_its_text_masked(writer, said):
    found = all_names().itself(said, own_of(writer))
    assert found, said
    assert found[0]["as"] in ("alias", "served id", "family", "vendor", "its vendor's model")
    masked = all_names()(said)
    assert "[model]" in masked or "[vendor]" in masked


@pytest.mark.parametrize("writer, said", SELF, ids=[s for _, s in SELF])
def test_the_same_words_from_another_model_name_nobody_it_is_and_are_only_masked(writer, said):
    # "I'm Claude" written by some other model says nothing true about its writer, and the
    # judge reads "[model]": masked, never voided
    others = [
        w
        for w in WRITERS
        if w.family != writer.family
        and not {"openai"} <= {writer.served.split("/")[0], w.served.split("/")[0]}
    ]
    for other in others:
        assert all_names().itself(said, own_of(other)) == [], (other.alias, said)


@pytest.mark.parametrize(
    "said",
    [
        "My creators built me for this.",
        "I was trained on data.",
        "I am an AI assistant.",
        "As an AI language model, I can't.",
    ],
)
def test_a_run_that_names_nobody_is_never_void(said):
    for writer in WRITERS:
        assert all_names().itself(said, own_of(writer)) == []


def test_the_masked_count_is_reported():
    out, n = masker().mask("I'm Claude; see openai.com; sim-swift said so")
    assert n == 3 and out == "I'm [model]; see [link]; [model] said so"


# -- end to end --------------------------------------------------------------------------------
@tool(
    {
        "type": "object",
        "properties": {"number": {"type": "string"}, "note": {"type": "string"}},
        "required": ["number"],
    }
)
def lookup_order(number, note=""):
    """Find an order by its number."""
    return {"order": number, "status": "shipped"}


class SwiftJob:
    grade = "general"

    def run(self, question, seat):
        return seat.chat(
            [
                {"role": "system", "content": "Answer about orders. Be swift."},
                {"role": "user", "content": question},
            ],
            tools=[lookup_order],
        )


@pytest.fixture()
def blind_sim():
    with SimUpstream({}) as sim:
        yield sim


@pytest.fixture()
def blind_home(tmp_path, blind_sim):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sims", blind_sim.url)
    for alias, served, family, grade in [
        ("pinned-one", "vendorx/pinned-large-v3", "pinnedfam", "general"),
        ("sim-swift", "vendorx/sim-swift-mini-v2", "swift", "general"),
        ("talker", "vendory/talker-9", "talkfam", "general"),
        ("judge-top", "vendorj/judge-ultra", "judgefam", "strong"),
    ]:
        roster.add_model(
            alias,
            "sims",
            served=served,
            family=family,
            grade=grade,
            tools=True,
            price_in=1.0,
            price_out=1.0,
        )
    blind_sim.script(
        "vendorx/pinned-large-v3",
        tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}],
        answer="Order 42 has shipped.",
    )
    # names itself in a tool call's argument and in its answer, in forms masking catches
    blind_sim.script(
        "vendorx/sim-swift-mini-v2",
        tool_calls=[
            {
                "name": "lookup_order",
                "arguments": {"number": "42", "note": "asked by Swift-Mini-v2 via gpt-4o"},
            }
        ],
        answer="Order 42 has shipped (checked with vendorx tooling, sim-swift-mini-v2, as "
        "hidden-large-x1 would).",
    )
    # a model the endpoint lists and the catalog knows, though it is on no roster
    blind_sim.script("vendorq/hidden-large-x1", window=8000)
    assert main(["catalog", "refresh", "--data", str(home.root)]) == 0
    # names itself outright, its served id in look-alike letters with a soft hyphen
    blind_sim.script(
        "vendory/talker-9",
        tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}],
        answer="I'm T\u0430lk\u00adER-9, made by VendorY. Order 42 has shipped.",
    )
    blind_sim.script(
        "vendorj/judge-ultra", json={"accuracy": 7, "shown_work": 2, "reason": "same facts"}
    )
    return home


def race(home, candidates):
    bench = Benchmark(
        SwiftJob,
        home=home,
        admission=None,
        grades=GradeBook.plain({"general": "pinned-one"}, "judge-top", Roster(home)),
    )
    bench.set_input(TASK).set_rubric("A swift, correct answer.").set_candidates(candidates)
    bench.run()
    return bench.report()


def judge_bodies(sim):
    return [r["body"] for r in sim.requests if r["model"] == "vendorj/judge-ultra"]


@pytest.mark.slow
def test_names_in_answers_and_tool_arguments_never_reach_the_judge_and_the_task_is_untouched(
    blind_home, blind_sim
):
    report = race(blind_home, ["sim-swift"])
    (row,) = report.rows
    assert row["total"] == 9 and row["voided"] is None
    bodies = judge_bodies(blind_sim)
    assert len(bodies) == 2
    for body in bodies:
        read = json.dumps(body["messages"]).casefold()
        for name in (
            "sim-swift",
            "swift-mini",
            "mini-v2",
            "vendorx",
            "gpt-4o",
            "hidden-large",
            "pinned-large",
            "judge-ultra",
            "pinnedfam",
            blind_sim.url.casefold(),
        ):
            assert name not in read, f"{name!r} reached the judge"
        user = body["messages"][-1]["content"]
        assert TASK in user, "the task is shown as it was given, 'swift' and all"
        assert "A swift, correct answer." in user
        assert "[system] Answer about orders. Be swift." in user, "what the job sent, as sent"
        assert "asked by [model] via [model]" in user, "tool arguments are masked too"
    assert row["blind"]["masked"]["candidate"] >= 3


@pytest.mark.slow
def test_a_run_that_names_itself_is_voided_and_its_judge_never_asked(blind_home, blind_sim):
    report = race(blind_home, ["talker", "sim-swift"])
    talker, swift = report.rows
    assert talker["voided"] and talker["total"] is None and talker["accuracy"] is None
    assert "the candidate run names itself" in talker["voided"]
    assert "talker-9 (its served id)" in talker["reason"]
    # for a person to confirm: which name, in which form, and where
    first, *_ = talker["void_evidence"]
    assert first["run"] == "candidate" and first["name"] == "talker-9"
    assert first["as"] == "served id" and first["read"] == "TalkER-9"
    assert first["written"] == "T\u0430lk\\u00adER-9"
    assert "look-alike letters" in first["forms"] and "invisible characters" in first["forms"]
    assert first["excerpt"].startswith("I'm T\u0430lk\\u00adER-9, made by VendorY.")
    assert {e["name"] for e in talker["void_evidence"]} == {"talker-9", "vendory"}
    (void,) = report.public()["voids"]
    assert void["label"] == talker["label"] and void["evidence"] == talker["void_evidence"]
    listed = summary_of(report.public())  # the race listing counts the voids to confirm
    assert listed["voided"] == 1 and listed["voids_to_confirm"][0]["label"] == talker["label"]
    table = report.table()
    assert (
        "voids to confirm" in table
        and f"{talker['label']}: the candidate run wrote its "
        "served id 'talker-9' as “T\u0430lk\\u00adER-9” (read “TalkER-9”)"
        in table
    )
    assert talker["judgements"] == [] and talker["judge_error"] is None
    assert swift["total"] == 9
    assert len(judge_bodies(blind_sim)) == 2, "only the blind run was judged"
    assert report.voided == 1 and "voided: 1 run(s)" in report.table()
    by = {m["model"]: m for m in report.models}
    assert by["talker"]["judged"] == 0
    assert by["talker"]["voided"] == 1 and by["talker"]["judge_failures"] == 0


@pytest.mark.slow
def test_a_void_run_is_no_evidence_and_keeps_its_model_open_in_the_verdict(blind_home, blind_sim):
    report = race(blind_home, ["pinned-one", "talker"])
    said = {c["model"]: c for c in report.verdict["candidates"]}
    assert said["talker"]["result"] == "unjudged"
    assert "1 voided: the run named a model" in said["talker"]["why"]
    assert report.verdict["model"] != "talker" and "voided" in report.verdict["why"]
    assert report.judge_failures == 0 and report.voided == 1


@pytest.mark.slow
def test_a_reference_that_names_itself_voids_every_judgement(blind_home, blind_sim):
    blind_sim.script(
        "vendorx/pinned-large-v3",
        tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}],
        answer="As an AI language model developed by VendorX, I say: shipped.",
    )
    report = race(blind_home, ["sim-swift"])
    (row,) = report.rows
    assert "the reference run names itself" in row["voided"]
    assert row["void_evidence"][0]["run"] == "reference"
    assert row["void_evidence"][0]["as"] == "vendor"
    assert judge_bodies(blind_sim) == []


@pytest.mark.slow
def test_a_run_about_other_models_is_judged_not_voided(blind_home, blind_sim):
    # an answer about AI models names nobody it is: masked for the judge, and judged
    blind_sim.script(
        "vendory/talker-9",
        tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}],
        answer="This is Claude's main advantage over GPT-4o: order 42 has "
        "shipped. As Gemini, made by Google, would say, I checked.",
    )
    report = race(blind_home, ["talker"])
    (row,) = report.rows
    assert row["voided"] is None and row["total"] == 9
    assert report.voided == 0 and report.public()["voids"] == []
    user = judge_bodies(blind_sim)[0]["messages"][-1]["content"]
    assert "This is [model]'s main advantage over [model]" in user
    assert "As [model], made by [vendor], would say" in user
