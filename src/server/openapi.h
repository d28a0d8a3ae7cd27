// The OpenAPI 3.1 document of the HTTP API: docs/openapi.json, built into the binary unchanged
// (cmake/CaudalEmbed.cmake) and served at GET /v1/openapi.json. The repository's file is the
// contract; tests/openapi lints it and checks live responses against its schemas.
#pragma once

#include <string_view>

namespace caudal::http_api {

// The document's bytes, valid for the life of the process.
std::string_view OpenApiJson();

}  // namespace caudal::http_api
