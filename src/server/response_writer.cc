#include "server/response_writer.h"

#include <boost/beast/http/status.hpp>
#include <charconv>

namespace caudal::http_server {
namespace {

void AppendNumber(std::string& out, uint64_t n) {
  char digits[20];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  out.append(digits, end);
}

}  // namespace

void WriteResponse(const http_api::Reply& reply, const ResponseFraming& framing, std::string& out) {
  namespace http = boost::beast::http;
  const auto reason = http::obsolete_reason(static_cast<http::status>(reply.status));
  out.clear();
  out.append(framing.version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  AppendNumber(out, static_cast<uint64_t>(reply.status));
  out.push_back(' ');
  out.append(reason.data(), reason.size()).append("\r\n");
  out.append(reply.headers.lines());
  if (!reply.content_type.empty()) {
    out.append("Content-Type: ").append(reply.content_type).append("\r\n");
  }
  out.append("Content-Length: ");
  AppendNumber(out, reply.body.size());
  out.append("\r\n");
  if (framing.connection == Connection::kClose) {
    out.append("Connection: close\r\n");
  } else if (framing.version == 10) {
    out.append("Connection: keep-alive\r\n");  // HTTP/1.0 closes unless told otherwise
  }
  out.append("\r\n");
  if (!framing.head) out.append(reply.body);
}

}  // namespace caudal::http_server
