"""How hybrid message search fuses its rankings, per deployment (settings `search_*`)."""

from dataclasses import dataclass

from memvm.config import Settings

# Measured on LoCoMo (issue 29; one turn a message): recall@10 of questions of categories 1-4 rose,
# on the conversations tuned on (26, 30) and on those held out (41-43), from 0.61/0.66 (k 60, no
# neighbours) to 0.68/0.69 with k 10, and to 0.69/0.71 adding neighbours at 0.25.
DEFAULT_RRF_K = 10
DEFAULT_NEIGHBOUR_WEIGHT = 0.25
# Feedback with 3 words rose recall@10 from 0.691 to 0.709 (tune) and 0.713 to 0.723 (held out); 10
# words gave 0.700/0.722. It took 1.5x (3 words) to 2x (10) the search's own time, two more
# statements, so p95 would pass its 50 ms target: off unless a deployment opts in.
DEFAULT_FEEDBACK_TERMS = 0
# Reading a message with its previous turn's words (search.lexical.with_previous_turns) at weight 1
# rose recall@10 from 0.691 to 0.748 (tune) and 0.713 to 0.733 (held out). The next turns come from
# the neighbours' statement, for the best full-text matches only: no statement and no time added
# (1.00-1.02x the search's own time; reading every match's next turn cost 1.25x).
DEFAULT_CONTEXT_WEIGHT = 1.0


@dataclass(frozen=True)
class SearchTuning:
    """rrf_k: the fusion constant; a small one lets each ranking's first hits count more than being
    found by both. neighbour_weight: a hit lends this share of its score to the messages just before
    and after it in its conversation (an answer usually follows the turn that matched); 0 turns it off.
    archival_hybrid: archival passage search fuses a full-text ranking with the vector one (with
    rrf_k, no neighbours); off, it ranks by vector alone. feedback_terms: hybrid message search adds
    up to this many words of its first fusion's best hits to the full-text query (search.feedback);
    0 turns it off. context_weight: in hybrid message search a message also matches the words of the
    turn before it, each at this share of a word of its own; 0 turns it off."""

    rrf_k: int = DEFAULT_RRF_K
    neighbour_weight: float = DEFAULT_NEIGHBOUR_WEIGHT
    archival_hybrid: bool = True
    feedback_terms: int = DEFAULT_FEEDBACK_TERMS
    context_weight: float = DEFAULT_CONTEXT_WEIGHT

    @classmethod
    def of(cls, settings: Settings) -> "SearchTuning":
        return cls(
            rrf_k=settings.search_rrf_k,
            neighbour_weight=settings.search_neighbour_weight,
            archival_hybrid=settings.search_archival_hybrid,
            feedback_terms=settings.search_feedback_terms,
            context_weight=settings.search_context_weight,
        )


DEFAULT_TUNING = SearchTuning()
