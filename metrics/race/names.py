"""Well-known model and vendor names, masked in what a race's judge reads (``race.blind``).

A built-in table beside the roster's and the catalog's own names: the names a model is likely
to call itself or its maker by. Each is a word, or words joined as a served id joins them;
``blind`` matches them case-insensitively on word boundaries, whatever joins their parts
(``GPT-4o``, ``gpt4o`` and ``GPT 4o`` are one name).

* ``MODELS`` and ``VENDORS`` are masked wherever they stand as words.
* ``CONTEXTUAL`` names are ordinary words as well (``meta``, ``command``, ``phi``, ``opus``):
  each is masked only beside a version number, beside another name, before one of its own next
  words (``Command R``, ``Meta AI``), or, for a vendor, after "by", "from" or "at". So "a meta
  question" and "the command line" stay as they are, and "Phi-3", "Claude 3 Opus" do not.
* ``DOMAINS``: vendors' sites whose words are none of the above (``x.ai``).
* ``TIERS``: words that name a size or edition; after a masked name they go with it
  ("Gemini 1.5 Pro" is one mask, never "[model] 1.5 Pro").
* ``MAKERS``: who makes a well-known model, by the model's name: a run of ``gpt-4o`` that says
  "made by OpenAI", or "I'm ChatGPT", names itself by its vendor (``race.selfname``).
"""

from __future__ import annotations

MODEL, VENDOR, ENDPOINT = "model", "vendor", "endpoint"

MODELS = (
    "claude",
    "chatgpt",
    "gpt",
    "gemini",
    "llama",
    "mistral",
    "mixtral",
    "codestral",
    "ministral",
    "pixtral",
    "magistral",
    "devstral",
    "qwen",
    "qwq",
    "tongyi",
    "qianwen",
    "deepseek",
    "grok",
    "gemma",
    "nemotron",
    "chatglm",
    "kimi",
    "hunyuan",
    "doubao",
    "jamba",
    "olmo",
    "starcoder",
    "dbrx",
    "vicuna",
    "reka",
    "dall-e",
)
VENDORS = (
    "anthropic",
    "openai",
    "google",
    "deepmind",
    "google deepmind",
    "microsoft",
    "alibaba",
    "alibaba cloud",
    "xai",
    "mistralai",
    "mistral ai",
    "cohere",
    "ai21",
    "nvidia",
    "baidu",
    "tencent",
    "bytedance",
    "zhipu",
    "zhipuai",
    "moonshotai",
    "huggingface",
    "hugging face",
    "openrouter",
    "groq",
    "databricks",
    "ibm",
    "aws",
    "allenai",
    "01.ai",
    "01-ai",
)
# name -> (what it names, the words after it that make it a name)
CONTEXTUAL = {
    "meta": (VENDOR, {"ai"}),
    "amazon": (VENDOR, {"bedrock", "nova", "titan"}),
    "perplexity": (VENDOR, {"ai"}),
    "inflection": (VENDOR, {"ai"}),
    "moonshot": (VENDOR, {"ai"}),
    "minimax": (VENDOR, {"ai"}),
    "fireworks": (VENDOR, {"ai"}),
    "command": (MODEL, {"r", "a"}),
    "phi": (MODEL, set()),
    "o1": (MODEL, {"mini", "preview", "pro"}),
    "o3": (MODEL, {"mini", "pro"}),
    "o4": (MODEL, {"mini"}),
    "sonnet": (MODEL, set()),
    "opus": (MODEL, set()),
    "haiku": (MODEL, set()),
    "nova": (MODEL, {"pro", "lite", "micro", "premier"}),
    "titan": (MODEL, set()),
    "falcon": (MODEL, set()),
    "yi": (MODEL, {"large", "lightning"}),
    "granite": (MODEL, set()),
    "sonar": (MODEL, {"pro", "reasoning"}),
    "ernie": (MODEL, {"bot"}),
    "bard": (MODEL, set()),
    "palm": (MODEL, set()),
    "glm": (MODEL, set()),
    "copilot": (MODEL, set()),
    "codex": (MODEL, {"mini"}),
}
DOMAINS = (
    "x.ai",
    "meta.ai",
    "together.ai",
    "fireworks.ai",
    "perplexity.ai",
    "moonshot.cn",
    "bigmodel.cn",
    "claude.ai",
    "chatgpt.com",
)
TIERS = frozenset(
    (
        "mini",
        "nano",
        "micro",
        "small",
        "medium",
        "large",
        "xl",
        "xxl",
        "pro",
        "plus",
        "max",
        "ultra",
        "turbo",
        "flash",
        "lite",
        "instruct",
        "preview",
        "sonnet",
        "opus",
        "haiku",
        "vision",
        "coder",
        "reasoner",
        "thinking",
        "exp",
        "experimental",
        "latest",
    )
)
# words before a vendor's name that make it the vendor's: "made by Meta", "a model from Amazon"
ORIGIN = frozenset(("by", "from", "at"))

# a well-known model's name -> its vendor's names (the first is how a report spells the vendor)
MAKERS = {
    "claude": ("anthropic",),
    "gpt": ("openai",),
    "chatgpt": ("openai",),
    "dall-e": ("openai",),
    "codex": ("openai",),
    "o1": ("openai",),
    "o3": ("openai",),
    "o4": ("openai",),
    "gemini": ("google", "deepmind", "google deepmind"),
    "gemma": ("google", "deepmind"),
    "bard": ("google",),
    "palm": ("google",),
    "llama": ("meta", "meta ai"),
    "mistral": ("mistral ai", "mistralai"),
    "mixtral": ("mistral ai", "mistralai"),
    "codestral": ("mistral ai", "mistralai"),
    "ministral": ("mistral ai", "mistralai"),
    "pixtral": ("mistral ai", "mistralai"),
    "magistral": ("mistral ai", "mistralai"),
    "devstral": ("mistral ai", "mistralai"),
    "qwen": ("alibaba", "alibaba cloud"),
    "qwq": ("alibaba", "alibaba cloud"),
    "tongyi": ("alibaba", "alibaba cloud"),
    "qianwen": ("alibaba", "alibaba cloud"),
    "deepseek": ("deepseek",),
    "grok": ("xai", "x.ai"),
    "phi": ("microsoft",),
    "copilot": ("microsoft",),
    "command": ("cohere",),
    "kimi": ("moonshot", "moonshotai"),
    "ernie": ("baidu",),
    "hunyuan": ("tencent",),
    "doubao": ("bytedance",),
    "glm": ("zhipu", "zhipuai"),
    "chatglm": ("zhipu", "zhipuai"),
    "nemotron": ("nvidia",),
    "jamba": ("ai21",),
    "nova": ("amazon",),
    "titan": ("amazon",),
    "olmo": ("allenai",),
    "granite": ("ibm",),
    "dbrx": ("databricks",),
    "sonar": ("perplexity",),
    "starcoder": ("huggingface", "hugging face"),
}
