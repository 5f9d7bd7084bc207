"""The gateway's API docs without the internet: Swagger UI and ReDoc from a Python package.

FastAPI's default ``/docs`` loads Swagger UI's script and styles from a CDN. That fails on a
machine without internet, and it runs third-party script on the origin whose console keeps
the operator's API key in session storage. Here the assets come from the ``fastapi-offline``
wheel (Swagger UI 5, which renders OpenAPI 3.1), mounted under ``/docs/assets``, so the docs
pages load nothing from another host.

The OpenAPI document declares the ``Authorization: Bearer <API key>`` scheme on every route
that reads that header (an operator route names the ``operator`` role), so Swagger UI's
Authorize button sends the key; and only the 422 answers a route can give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from ledger_stream.gateway.refusals import SCHEME, drop_implicit_422

ASSETS = Path(fastapi_offline.__file__).with_name("static")
ASSETS_URL = "/docs/assets"


def add_offline_docs(app: FastAPI) -> None:
    """Serve ``/docs`` (Swagger UI) and ``/redoc`` from the package's assets and declare the
    bearer scheme in ``/openapi.json``. ``app`` must be made with ``docs_url=None`` and
    ``redoc_url=None`` (else FastAPI's CDN pages take those paths first)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{app.title}: API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={"persistAuthorization": False})

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url, title=f"{app.title}: API",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png", with_google_fonts=False)

    plain_openapi = app.openapi

    def openapi_with_scheme() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = drop_implicit_422(declare_bearer(plain_openapi()))
        return app.openapi_schema

    app.openapi = openapi_with_scheme  # type: ignore[method-assign]


def declare_bearer(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the bearer scheme, required by each operation that reads the
    Authorization header (with no role unless the route names one: ``refusals.OPERATOR_KEY``).
    That header's own parameter is dropped: OpenAPI ignores a header
    parameter named so, and Swagger UI would show it as a field beside Authorize."""
    schema.setdefault("components", {}).setdefault("securitySchemes", {})[SCHEME] = {
        "type": "http", "scheme": "bearer",
        "description": "an API key of the gateway (LEDGER_API_KEYS): a tenant's agent or "
                       "operator key; a route that names the role operator takes an "
                       "operator's key (TENANT:operator:NAME=KEY) only"}
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            parameters = operation.get("parameters", [])
            kept = [p for p in parameters if not _is_authorization(p)]
            if len(kept) == len(parameters):
                continue
            operation.setdefault("security", [{SCHEME: []}])
            if kept:
                operation["parameters"] = kept
            else:
                del operation["parameters"]
    return schema


def _is_authorization(parameter: dict[str, Any]) -> bool:
    return parameter.get("in") == "header" and \
        str(parameter.get("name", "")).lower() == "authorization"
