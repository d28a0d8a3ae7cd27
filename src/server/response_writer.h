// WriteResponse: a Reply as the bytes of one HTTP/1.x response (status line, fields,
// Content-Length, Connection, body), built into a buffer the connection reuses, so the transport
// writes it with one call and answering allocates nothing once the buffer has grown.
// Does no I/O. Thread-safety: none needed (a pure function of its arguments).
#pragma once

#include <string>

#include "server/http_api.h"

namespace caudal::http_server {

enum class Connection : uint8_t {
  kKeepAlive,
  kClose,  // the server closes after this response: says so with Connection: close
};

struct ResponseFraming {
  int version = 11;   // the request's: 10 or 11
  bool head = false;  // a HEAD request: every field, Content-Length of the body, no body
  Connection connection = Connection::kKeepAlive;
};

// Replaces `out` with the response; keeps its capacity.
void WriteResponse(const http_api::Reply& reply, const ResponseFraming& framing, std::string& out);

}  // namespace caudal::http_server
