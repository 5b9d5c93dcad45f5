"""Recent: what MemFS keeps of the objects and answers it served last."""

from memvm.memfs.recent import Recent


def test_the_least_recently_used_key_is_forgotten_first():
    recent: Recent[str, int] = Recent(2)
    recent.put("a", 1)
    recent.put("b", 2)
    assert recent.get("a") == 1  # a is now the most recent
    recent.put("c", 3)

    assert (recent.get("a"), recent.get("b"), recent.get("c")) == (1, None, 3)


def test_putting_a_key_again_replaces_its_value_and_keeps_it():
    recent: Recent[str, int] = Recent(2)
    recent.put("a", 1)
    recent.put("b", 2)
    recent.put("a", 10)
    recent.put("c", 3)

    assert (recent.get("a"), recent.get("b")) == (10, None)
