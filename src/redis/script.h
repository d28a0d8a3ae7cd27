// The Lua script that decides batches of requests inside Redis: src/redis/lua/*.lua, one file
// per algorithm, concatenated and embedded at build time. The SHA1 is computed at build time
// too, so EVALSHA can be sent before SCRIPT LOAD's reply arrives.
#pragma once

#include <string_view>

namespace caudal::redis {

extern const std::string_view kDecideScript;
extern const std::string_view kDecideSha1;  // 40 lowercase hex digits

// The fast script (lua/consume.lua) for a call whose requests are all plain consumes
// (IsPlainConsume in lua_protocol.h) with declared keys: the same wire format, state and
// decisions, without the parts a plain consume never runs.
extern const std::string_view kConsumeScript;
extern const std::string_view kConsumeSha1;

// The same as a function library (FUNCTION LOAD, Redis 7+): its definitions run once, at load,
// where a script's run at every call, which makes each call cheaper. Its name and the function's
// carry the script's SHA1, so builds that differ each load and call their own. A server that
// refuses FUNCTION (older, renamed, an ACL) is sent the script instead.
extern const std::string_view kConsumeLibrary;
extern const std::string_view kConsumeLibraryName;  // caudal_<16 hex digits>
extern const std::string_view kConsumeFunction;     // caudal_consume_<the same 16 digits>

}  // namespace caudal::redis
