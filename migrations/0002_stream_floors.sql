-- Each daemon publishes, per database, the newest commit that all of its
-- connected stream subscribers have already read. Pruning keeps every
-- commit after the lowest fresh floor of any daemon, so a subscriber on
-- another replica that is catching up never finds its history gone.
CREATE TABLE sluice.stream_floors (
    replica     text NOT NULL,
    db_id       bigint NOT NULL,
    seq         bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, db_id)
);
