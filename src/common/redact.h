// RedactUrl: a URL safe to print — "redis://app:s3cret@cache:6379/0" becomes
// "redis://app:***@cache:6379/0". Everything between the user name's ':' and the last '@' of the
// authority is replaced, so a password holding '@' or '/' is hidden whole. A URL without
// credentials is returned as it is.
#pragma once

#include <string>
#include <string_view>

namespace caudal {

std::string RedactUrl(std::string_view url);

}  // namespace caudal
