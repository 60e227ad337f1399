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
"""

from __future__ import annotations

MODEL, VENDOR, ENDPOINT = "model", "vendor", "endpoint"

MODELS = (
    "claude", "chatgpt", "gpt", "gemini", "llama", "mistral", "mixtral", "codestral",
    "ministral", "pixtral", "magistral", "devstral", "qwen", "qwq", "tongyi", "qianwen",
    "deepseek", "grok", "gemma", "nemotron", "chatglm", "kimi", "hunyuan", "doubao", "jamba",
    "olmo", "starcoder", "dbrx", "vicuna", "reka", "dall-e",
)
VENDORS = (
    "anthropic", "openai", "google", "deepmind", "google deepmind", "microsoft", "alibaba",
    "alibaba cloud", "xai", "mistralai", "mistral ai", "cohere", "ai21", "nvidia", "baidu",
    "tencent", "bytedance", "zhipu", "zhipuai", "moonshotai", "huggingface", "hugging face",
    "openrouter", "groq", "databricks", "ibm", "aws", "allenai", "01.ai", "01-ai",
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
DOMAINS = ("x.ai", "meta.ai", "together.ai", "fireworks.ai", "perplexity.ai", "moonshot.cn",
           "bigmodel.cn", "claude.ai", "chatgpt.com")
TIERS = frozenset((
    "mini", "nano", "micro", "small", "medium", "large", "xl", "xxl", "pro", "plus", "max",
    "ultra", "turbo", "flash", "lite", "instruct", "preview", "sonnet", "opus", "haiku",
    "vision", "coder", "reasoner", "thinking", "exp", "experimental", "latest",
))
# words before a vendor's name that make it the vendor's: "made by Meta", "a model from Amazon"
ORIGIN = frozenset(("by", "from", "at"))
