"""The web playground: a page for people, served by the gateway at `/` to browsers
(page.py), with its plain JavaScript modules and CSS under `/playground/` (static/). No build
step and nothing fetched from elsewhere: it talks to this server's own API, with the API key
the user types when a request is refused (docs/playground.md)."""
