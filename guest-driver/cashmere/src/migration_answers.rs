//! The answers to migration requests, per requester (seed 002 s.3.1): an
//! at-most-once reply cache. A migration request asked again (its answer
//! came late or damaged) keeps its sequence number and gets the same
//! answer: a grant moves the home, so it must be decided once.

pub(crate) struct MigrationAnswers {
    /// Per requester: the sequence number of the last migration request
    /// answered, and the answer's word.
    last: Vec<(u32, u32)>,
}

impl MigrationAnswers {
    pub(crate) fn new(nodes: u32) -> MigrationAnswers {
        MigrationAnswers {
            last: vec![(0, 0); nodes as usize],
        }
    }

    /// The answer given to node `r`'s migration request `seq`, if this is
    /// that request again.
    pub(crate) fn repeated(&self, r: u32, seq: u32) -> Option<u32> {
        let (answered, answer) = self.last[r as usize];
        (answered == seq).then_some(answer)
    }

    /// Node `r`'s migration request `seq` was answered `answer`.
    pub(crate) fn answered(&mut self, r: u32, seq: u32, answer: u32) {
        self.last[r as usize] = (seq, answer);
    }
}
