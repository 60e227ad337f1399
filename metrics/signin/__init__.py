"""Provider sign-in: connect an endpoint by signing in to its provider instead of pasting a key.

providers  config/providers.json: each provider's URLs and field names, validated
pkce       the verifier, its S256 challenge and the state (RFC 7636)
listener   the one-shot loopback listener that receives the provider's redirect
exchange   the one POST that trades code + verifier for the key
flow       the whole flow, for the command line and the dashboard: the key lands in the
           endpoint's key variable (``roster.keystore``), and nowhere else
"""
