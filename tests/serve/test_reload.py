"""SIGHUP: a good file replaces the policies; a bad one is refused with its reason logged and the
old policies keep serving."""
import signal
import unittest

from harness import Serve, wait_until

OLD = """
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 1, refill: 1/1h}]
"""
NEW = """
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 3, refill: 3/1h}]
  - name: q
    identity: [tenant]
    limits: [{algorithm: gcra, capacity: 1, refill: 1/1h}]
"""
BAD = """
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: many, refill: 3/1h}]
"""


class Reload(unittest.TestCase):
    def setUp(self):
        self.s = Serve(OLD)

    def tearDown(self):
        self.s.close()

    def reload(self, text, result):
        before = self.s.metric('caudal_config_reloads_total{result="%s"}' % result)
        self.s.write_config(text)
        self.s.signal(signal.SIGHUP)
        wait_until(lambda: self.s.metric('caudal_config_reloads_total{result="%s"}' % result) > before,
                   "the reload to be counted")

    def test_good_file_replaces_the_policies(self):
        self.assertEqual(self.s.check({"api_key": "k"})[0], 200)
        self.assertEqual(self.s.check({"api_key": "k"})[0], 429)
        self.reload(NEW, "success")
        status, h, body = self.s.check({"api_key": "k", "tenant": "t"})
        self.assertEqual(status, 200)  # a changed limit starts from fresh state
        self.assertEqual([p["name"] for p in body["policies"]], ["p", "q"])
        self.assertEqual(h["ratelimit-policy"], '"q";q=1;w=3600')
        # The reload is counted before its line is logged: wait for the line.
        wait_until(lambda: "reloaded" in self.s.log(), "the reload's log line")

    def test_bad_file_is_refused_and_old_policies_keep_serving(self):
        self.assertEqual(self.s.check({"api_key": "k"})[0], 200)
        self.reload(BAD, "failure")
        self.assertEqual(self.s.check({"api_key": "k"})[0], 429)  # still capacity 1, same state
        # The refusal is counted before its line is logged: wait for the line.
        wait_until(lambda: "reload refused" in self.s.log(), "the refusal's log line")
        log = self.s.log()
        self.assertIn("reload refused, the previous 1 policies keep serving", log)
        self.assertIn("caudal.yaml:5:42: policies[0].limits[0].capacity: expected an integer", log)
        self.reload(NEW, "success")  # and a fixed file is taken afterwards
        self.assertEqual(self.s.check({"api_key": "k"})[0], 200)


if __name__ == "__main__":
    unittest.main()
