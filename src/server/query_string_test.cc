// The one query-string parser: decoding, and every way a query is refused.
#include "server/query_string.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/cat.h"

namespace caudal::http_api {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

Pairs PairsOf(const ParsedQuery& q) {
  Pairs out;
  for (const QueryParam& p : q.params) out.emplace_back(p.name, p.value);
  return out;
}

TEST(PercentDecode, DecodesEscapesInEitherCaseAndPlusAsAsked) {
  EXPECT_EQ(PercentDecode("a%20b%2fc%2F%41", Plus::kSpace), "a b/c/A");
  EXPECT_EQ(PercentDecode("a+b%2B", Plus::kSpace), "a b+");
  EXPECT_EQ(PercentDecode("a+b%2B", Plus::kLiteral), "a+b+");
  EXPECT_EQ(PercentDecode("%00%ff", Plus::kSpace), std::string("\0\xff", 2));  // bytes, as sent
  EXPECT_EQ(PercentDecode("%2541", Plus::kSpace), "%41");                      // decoded once
  EXPECT_EQ(PercentDecode("", Plus::kSpace), "");
}

TEST(PercentDecode, RefusesAnEscapeWithoutTwoHexDigits) {
  for (std::string_view bad : {"%", "a%", "%4", "a%4", "%zz", "%4g", "%G0", "%%", "%%41", "% 41",
                               "%-1", "%+1", "%\x80\x80"}) {
    EXPECT_FALSE(PercentDecode(bad, Plus::kSpace).has_value()) << bad;
    EXPECT_FALSE(PercentDecode(bad, Plus::kLiteral).has_value()) << bad;
  }
}

TEST(ParseQuery, ReadsParametersInOrderDecoded) {
  const ParsedQuery q = ParseQuery("/p?a=1&b%5B%5D=x+y&c=%3D%26&d=e=f&g&h=");
  ASSERT_FALSE(q.error) << q.error->message;
  EXPECT_EQ(PairsOf(q),
            (Pairs{{"a", "1"}, {"b[]", "x y"}, {"c", "=&"}, {"d", "e=f"}, {"g", ""}, {"h", ""}}));
  ASSERT_NE(q.Find("d"), nullptr);
  EXPECT_EQ(*q.Find("d"), "e=f");
  ASSERT_NE(q.Find("g"), nullptr);  // given, with an empty value
  EXPECT_EQ(*q.Find("g"), "");
  EXPECT_EQ(q.Find("z"), nullptr);
  EXPECT_EQ(q.Find("b%5B%5D"), nullptr) << "names are found decoded";
}

TEST(ParseQuery, EmptyParametersAreNone) {
  for (std::string_view target : {"/p", "/p?", "/p?&", "/p?&&&", ""}) {
    const ParsedQuery q = ParseQuery(target);
    EXPECT_FALSE(q.error) << target;
    EXPECT_TRUE(q.params.empty()) << target;
  }
  EXPECT_EQ(PairsOf(ParseQuery("/p?&a=1&&b=2&")), (Pairs{{"a", "1"}, {"b", "2"}}));
  // An empty name is a parameter all the same (an endpoint refuses it as unknown).
  EXPECT_EQ(PairsOf(ParseQuery("/p?=1")), (Pairs{{"", "1"}}));
}

TEST(ParseQuery, TheQueryIsWhatFollowsTheFirstQuestionMark) {
  EXPECT_EQ(PairsOf(ParseQuery("/p?a=b?c&d=?")), (Pairs{{"a", "b?c"}, {"d", "?"}}));
  EXPECT_EQ(PairsOf(ParseQuery("/a%3Fb=c")), Pairs{}) << "an escaped '?' in the path is no query";
}

TEST(ParseQuery, RefusesABadEscapeInANameOrValue) {
  for (std::string_view target : {"/p?a=%", "/p?%zz=1", "/p?a=1&b=%4", "/p?a=%G1&b=2"}) {
    const ParsedQuery q = ParseQuery(target);
    ASSERT_TRUE(q.error) << target;
    EXPECT_EQ(q.error->status, 400);
    EXPECT_EQ(q.error->code, "invalid_parameter");
    EXPECT_TRUE(q.params.empty()) << "nothing of a refused query is read";
  }
  EXPECT_EQ(ParseQuery("/p?a=1&b=%4").error->message,
            "the query: bad percent-encoding in \"b=%4\"");
}

TEST(ParseQuery, RefusesARepeatedNameHoweverItIsSpelt) {
  for (std::string_view target :
       {"/p?a=1&a=2", "/p?a=1&a=1", "/p?a&a", "/p?a=1&b=2&%61=3", "/p?a+b=1&a%20b=2", "/p?=&="}) {
    const ParsedQuery q = ParseQuery(target);
    ASSERT_TRUE(q.error) << target;
    EXPECT_EQ(q.error->status, 400);
    EXPECT_EQ(q.error->code, "duplicate_parameter") << target;
    EXPECT_TRUE(q.params.empty());
  }
  EXPECT_EQ(ParseQuery("/p?top=1&top=2").error->message,
            "parameter \"top\": given twice (ambiguous; refused)");
  // Names differ by case: two parameters.
  EXPECT_EQ(PairsOf(ParseQuery("/p?a=1&A=2")), (Pairs{{"a", "1"}, {"A", "2"}}));
}

TEST(ParseQuery, RefusesMoreThanItsBoundOfParameters) {
  std::string target = "/p?";
  for (size_t i = 0; i < kMaxQueryParams; ++i) target += Cat("p", i, "=", i, "&");
  const ParsedQuery full = ParseQuery(target);
  ASSERT_FALSE(full.error) << full.error->message;
  EXPECT_EQ(full.params.size(), kMaxQueryParams);
  const ParsedQuery over = ParseQuery(target + "one=more");
  ASSERT_TRUE(over.error);
  EXPECT_EQ(over.error->code, "invalid_parameter");
  EXPECT_EQ(over.error->message, Cat("the query: more than ", kMaxQueryParams, " parameters"));
  EXPECT_TRUE(over.params.empty());
  // Empty parameters do not count.
  EXPECT_FALSE(ParseQuery(target + "&&&&").error);
}

TEST(ParseQuery, QuotesAtMostABoundedPieceOfTheInput) {
  const std::string long_name(10'000, 'n');
  const ParsedQuery twice = ParseQuery("/p?" + long_name + "&" + long_name);
  ASSERT_TRUE(twice.error);
  EXPECT_LT(twice.error->message.size(), 200u);
  const ParsedQuery bad = ParseQuery("/p?" + long_name + "=%");
  ASSERT_TRUE(bad.error);
  EXPECT_LT(bad.error->message.size(), 200u);
}

}  // namespace
}  // namespace caudal::http_api
