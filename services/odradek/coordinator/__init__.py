"""What Kafka's coordinators share (``coordinator-common``): the framing of the records they keep
in their internal topics (``records``). The group coordinator (``odradek.groups``) and the
transaction coordinator (``odradek.transactions``) each declare their record types in their own
``RecordFormat``. Pure; imports neither coordinator nor the broker.
"""
