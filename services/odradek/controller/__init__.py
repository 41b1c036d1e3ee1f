"""The controller: one active instance, elected through ZooKeeper, owns placement and leadership."""
