// The embedded script against the C++ it must agree with: constants generated from the algorithm
// table and the Verdict enum, a registered decide/refund pair for every compact algorithm, and a
// SHA1 that is the script's (EVALSHA calls it by that name); the same of the fast script for plain
// consumes. What the scripts decide is compared with the C++ algorithms by
// tests/redis/lua_equivalence_test.cc.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <cctype>
#include <string>

#include "algorithms/algorithm.h"
#include "redis/script.h"

namespace caudal::redis {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

struct Script {
  std::string_view name, text, sha1;
};
const Script kScripts[] = {{"decide", kDecideScript, kDecideSha1},
                           {"consume", kConsumeScript, kConsumeSha1}};

size_t Count(std::string_view text, std::string_view needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(LuaScript, DefinesEachAlgorithmsConstantOnceWithItsEnumValue) {
  for (const Script& script : kScripts) {
    for (const AlgorithmInfo& e : kAlgorithmTable) {
      const std::string name = Upper(e.name);
      EXPECT_EQ(Count(script.text, "\nlocal " + name + " = " +
                                       std::to_string(static_cast<int>(e.algorithm)) + "\n"),
                1)
          << script.name << ": " << name;
      EXPECT_EQ(Count(script.text, "local " + name + " ="), 1) << script.name << ": " << name;
    }
  }
}

TEST(LuaScript, DefinesTheVerdictsWithTheirEnumValues) {
  for (const Script& script : kScripts) {
    for (const Verdict v : {Verdict::kAllowed, Verdict::kDenied, Verdict::kNeverFits}) {
      const std::string name = Upper(VerdictName(v));
      EXPECT_EQ(Count(script.text,
                      "\nlocal " + name + " = " + std::to_string(static_cast<int>(v)) + "\n"),
                1)
          << script.name << ": " << name;
    }
  }
}

// Both scripts: the fast one decides every compact algorithm (IsPlainConsume lets each through).
TEST(LuaScript, EveryCompactAlgorithmRegistersItsFunctions) {
  for (const Script& script : kScripts) {
    for (const AlgorithmInfo& e : kAlgorithmTable) {
      if (e.state != StateShape::kCompact) continue;
      const std::string name = Upper(e.name);
      const std::string line = "\nCOMPACT[" + name + "], COMPACT_REFUND[" + name +
                               "] = " + std::string(e.name) + ", " + std::string(e.name) +
                               "_refund\n";
      EXPECT_EQ(Count(script.text, line), 1) << script.name << ": " << line;
    }
  }
}

TEST(LuaScript, ConstantsComeFirstAndDecideLast) {
  EXPECT_EQ(kDecideScript.find("-- Generated at build time from the algorithm table"), 0u);
  const size_t prelude = kDecideScript.find("-- caudal's Lua prelude");
  const size_t decide = kDecideScript.find("-- caudal: decides a batch");
  ASSERT_NE(prelude, std::string_view::npos);
  ASSERT_NE(decide, std::string_view::npos);
  EXPECT_LT(prelude, decide);
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    const size_t def = kDecideScript.find("local function " + std::string(e.name) + "(");
    if (e.state == StateShape::kCompact) {
      ASSERT_NE(def, std::string_view::npos) << e.name;
      EXPECT_LT(prelude, def) << e.name;
      EXPECT_LT(def, decide) << e.name;
    }
  }
}

TEST(LuaScript, Sha1IsTheScriptsDigest) {
  for (const Script& script : kScripts) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    ASSERT_EQ(
        EVP_Digest(script.text.data(), script.text.size(), md.data(), &len, EVP_sha1(), nullptr),
        1);
    std::string hex;
    constexpr char kDigits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < len; ++i) {
      hex += kDigits[md[i] >> 4];
      hex += kDigits[md[i] & 15];
    }
    EXPECT_EQ(script.sha1, hex) << script.name;
  }
}

// The library carries the fast script's SHA1 in its name and its function's, so that builds that
// differ load and call their own; its parts are the script's, the last one split at "Each call".
TEST(LuaScript, TheLibraryIsTheFastScriptNamedByItsSha1) {
  const std::string version(kConsumeSha1.substr(0, 16));
  EXPECT_EQ(kConsumeLibraryName, "caudal_" + version);
  EXPECT_EQ(kConsumeFunction, "caudal_consume_" + version);
  EXPECT_TRUE(kConsumeLibrary.starts_with("#!lua name=caudal_" + version + "\n"));
  EXPECT_EQ(Count(kConsumeLibrary, "redis.register_function('" + std::string(kConsumeFunction)), 1);
  const size_t each = kConsumeScript.find("\n-- Each call.\n");
  ASSERT_NE(each, std::string_view::npos);
  // Everything before that line is in the library as it is, and the rest too, inside the
  // function: nothing of the script is left out.
  EXPECT_NE(kConsumeLibrary.find(kConsumeScript.substr(0, each)), std::string_view::npos);
  EXPECT_NE(kConsumeLibrary.find(kConsumeScript.substr(each, kConsumeScript.size() - each - 1)),
            std::string_view::npos);
}

}  // namespace
}  // namespace caudal::redis
